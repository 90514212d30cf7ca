package gvisor

import (
	"errors"
	"fmt"
	"path/filepath"
	"sort"
	"strconv"
	"strings"

	"github.com/sandbox-run/sandbox-run/mount"
)

// ErrLayout marks a plan that cannot be expressed as an OCI spec.
var ErrLayout = errors.New("gvisor: layout not expressible")

// Spec is the subset of the OCI runtime spec (1.0) that runsc reads and
// sandbox-run sets. Field names and JSON follow the specification.
type Spec struct {
	OCIVersion string  `json:"ociVersion"`
	Process    Process `json:"process"`
	Root       Root    `json:"root"`
	Hostname   string  `json:"hostname"`
	Mounts     []Mount `json:"mounts"`
	Linux      Linux   `json:"linux"`
}

// Process is the command and how it runs.
type Process struct {
	Terminal        bool         `json:"terminal"`
	User            User         `json:"user"`
	Args            []string     `json:"args"`
	Env             []string     `json:"env"`
	Cwd             string       `json:"cwd"`
	Capabilities    Capabilities `json:"capabilities"`
	Rlimits         []Rlimit     `json:"rlimits,omitempty"`
	NoNewPrivileges bool         `json:"noNewPrivileges"`
}

// User is the uid and gid the command runs as inside.
type User struct {
	UID            int   `json:"uid"`
	GID            int   `json:"gid"`
	AdditionalGids []int `json:"additionalGids,omitempty"`
}

// Capabilities are all empty, save CAP_NET_ADMIN in init's effective and
// permitted sets when Input.NetAdmin asks for it (never in the bounding
// set, so no execve can gain it back): the command holds none.
type Capabilities struct {
	Bounding    []string `json:"bounding"`
	Effective   []string `json:"effective"`
	Inheritable []string `json:"inheritable"`
	Permitted   []string `json:"permitted"`
	Ambient     []string `json:"ambient"`
}

// Rlimit is one POSIX resource limit, enforced by gVisor's kernel.
type Rlimit struct {
	Type string `json:"type"`
	Hard uint64 `json:"hard"`
	Soft uint64 `json:"soft"`
}

// Root is the root file system: a directory of the bundle.
type Root struct {
	Path     string `json:"path"`
	Readonly bool   `json:"readonly"`
}

// Mount is one OCI mount; runsc applies them in order.
type Mount struct {
	Destination string   `json:"destination"`
	Type        string   `json:"type"`
	Source      string   `json:"source"`
	Options     []string `json:"options,omitempty"`
}

// Linux holds the namespaces; no resources (see the package doc).
type Linux struct {
	Namespaces []Namespace `json:"namespaces"`
}

// Namespace is one namespace the sandbox gets.
type Namespace struct {
	Type string `json:"type"`
}

// Point is a mount point or link the caller creates in the bundle's root
// directory before runsc starts: the root is read-only, so every
// destination must exist there.
type Point struct {
	Path string // inside the sandbox, absolute
	Dir  bool   // a directory; otherwise an empty file
	Link string // when set, a symbolic link to Link instead
}

// Input is everything the spec is made of. Mounts is the run's mount plan
// in the order bwrap would apply it; the caller has vetted every source.
type Input struct {
	Args    []string
	Env     []string
	Cwd     string
	UID     int
	GID     int
	Mounts  []mount.Step
	Rlimits []Rlimit
	// Rootfs is the bundle's root directory (relative to the bundle) and
	// Empty an empty read-only file there that covers sockets and FIFOs.
	Rootfs string
	Empty  string
	// Files names the bind destinations whose source is not a directory
	// (a host fact the caller reads): their mount point is an empty file.
	Files map[string]bool
	// NetAdmin gives the sandbox's first process (sandbox-run's init)
	// CAP_NET_ADMIN in gVisor's kernel, to make the TUN device of
	// transparent egress; init drops it on every thread before it starts
	// the command. The bounding set stays empty.
	NetAdmin bool
}

// Bundle is a rendered spec and the points its root needs.
type Bundle struct {
	Spec   Spec
	Points []Point
}

// Render turns in into a bundle. It fails, wrapping ErrLayout, for a plan
// step runsc cannot express (a link below the root's first level, an
// unknown kind) or an argument holding a NUL byte.
func Render(in Input) (Bundle, error) {
	if err := checkNUL(in); err != nil {
		return Bundle{}, err
	}
	caps := []string{}
	if in.NetAdmin {
		caps = []string{"CAP_NET_ADMIN"}
	}
	b := Bundle{Spec: Spec{
		OCIVersion: "1.0.0",
		Process: Process{
			User: User{UID: in.UID, GID: in.GID}, Args: in.Args, Env: in.Env, Cwd: in.Cwd,
			Capabilities:    Capabilities{Bounding: []string{}, Effective: caps, Inheritable: []string{}, Permitted: caps, Ambient: []string{}},
			Rlimits:         in.Rlimits,
			NoNewPrivileges: true,
		},
		Root:     Root{Path: in.Rootfs, Readonly: true},
		Hostname: "sandbox",
		Mounts:   []Mount{},
		Linux: Linux{Namespaces: []Namespace{
			{Type: "pid"}, {Type: "network"}, {Type: "ipc"}, {Type: "uts"}, {Type: "mount"},
		}},
	}}
	points := map[string]Point{}
	for _, m := range in.Mounts {
		// A link below the first level is made only in a directory the
		// bundle makes itself (an earlier point), never under a bind.
		if m.Kind == mount.Symlink && strings.Count(m.Dst, "/") > 1 {
			if pt, ok := points[filepath.Dir(m.Dst)]; !ok || !pt.Dir || pt.Link != "" || boundAt(b.Spec.Mounts, filepath.Dir(m.Dst)) {
				return Bundle{}, fmt.Errorf("%w: link %s is not in a directory of the bundle", ErrLayout, m.Dst)
			}
			points[m.Dst] = Point{Path: m.Dst, Link: m.Src}
			continue
		}
		om, pt, keep, err := mountOf(m, in.Empty, in.Files)
		if err != nil {
			return Bundle{}, err
		}
		// The first point at a path wins: a later bind there reuses it.
		if _, seen := points[pt.Path]; pt.Path != "" && !seen {
			points[pt.Path] = pt
		}
		if keep {
			b.Spec.Mounts = append(b.Spec.Mounts, om)
		}
	}
	b.Points = sortedPoints(points)
	return b, nil
}

// mountOf renders one plan step: the OCI mount (keep false when the step
// is not rendered) and the point it needs in the root.
func mountOf(m mount.Step, empty string, files map[string]bool) (Mount, Point, bool, error) {
	switch m.Kind {
	case mount.ROBind, mount.Bind:
		if underProc(m.Dst) {
			return Mount{}, Point{}, false, nil
		}
		src, opts := m.Src, []string{"rbind", "rw"}
		if m.Kind == mount.ROBind {
			opts = []string{"rbind", "ro"}
		}
		file := files[m.Dst]
		if src == "/dev/null" {
			src, file = empty, true
		}
		return Mount{Destination: m.Dst, Type: "bind", Source: src, Options: opts}, Point{Path: m.Dst, Dir: !file}, true, nil
	case mount.Symlink:
		if strings.Count(m.Dst, "/") != 1 {
			return Mount{}, Point{}, false, fmt.Errorf("%w: link %s is not at the root's first level", ErrLayout, m.Dst)
		}
		return Mount{}, Point{Path: m.Dst, Link: m.Src}, false, nil
	case mount.Proc:
		return Mount{Destination: m.Dst, Type: "proc", Source: "proc"}, Point{Path: m.Dst, Dir: true}, true, nil
	case mount.Tmpfs:
		if underProc(m.Dst) {
			return Mount{}, Point{}, false, nil
		}
		opts := []string{"nosuid", "nodev", "mode=1777"}
		if m.Size > 0 {
			opts = append(opts, "size="+strconv.FormatInt(m.Size, 10))
		}
		return Mount{Destination: m.Dst, Type: "tmpfs", Source: "tmpfs", Options: opts}, Point{Path: m.Dst, Dir: true}, true, nil
	case mount.Dev:
		// runsc mounts gVisor's own /dev (its devtmpfs with the standard
		// nodes) at /dev whatever the spec says.
		return Mount{}, Point{Path: m.Dst, Dir: true}, false, nil
	case mount.RemountRO:
		// "/" is the root's readonly flag; /dev is gVisor's own; the
		// plan's /proc entries are not rendered.
		return Mount{}, Point{}, false, nil
	case mount.Dir:
		return Mount{}, Point{Path: m.Dst, Dir: true}, false, nil
	}
	return Mount{}, Point{}, false, fmt.Errorf("%w: mount kind %v", ErrLayout, m.Kind)
}

// boundAt reports whether a mount so far lies at dst.
func boundAt(ms []Mount, dst string) bool {
	for _, m := range ms {
		if m.Destination == dst {
			return true
		}
	}
	return false
}

func underProc(p string) bool { return strings.HasPrefix(p, "/proc/") }

// sortedPoints orders points so that a parent comes before its children.
func sortedPoints(m map[string]Point) []Point {
	out := make([]Point, 0, len(m))
	for _, p := range m {
		out = append(out, p)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Path < out[j].Path })
	return out
}

func checkNUL(in Input) error {
	all := append(append([]string{in.Cwd}, in.Args...), in.Env...)
	for _, m := range in.Mounts {
		all = append(all, m.Src, m.Dst)
	}
	for i, s := range all {
		if strings.IndexByte(s, 0) >= 0 {
			return fmt.Errorf("%w: value %d holds a NUL byte", ErrLayout, i)
		}
	}
	for _, m := range in.Mounts {
		if m.Dst != "" && (!filepath.IsAbs(m.Dst) || filepath.Clean(m.Dst) != m.Dst) {
			return fmt.Errorf("%w: destination %q is not absolute and clean", ErrLayout, m.Dst)
		}
	}
	return nil
}
