package landlock

import (
	"slices"
	"strconv"

	llrules "github.com/sandbox-run/sandbox-run/landlock"
	"github.com/sandbox-run/sandbox-run/mount"
	"github.com/sandbox-run/sandbox-run/policy"
)

// Facts are what the translation of a plan needs to know of the host
// besides the plan itself, gathered by the caller (hostFacts) so that
// translate stays pure.
type Facts struct {
	// Files are the bind sources that are not directories: Landlock
	// grants a file file rights only (the kernel refuses directory
	// rights on it).
	Files map[string]bool
	// DevWrite and DevRead are the device files of llDevWrite and
	// llDevRead that the host has: what stands for the plan's /dev.
	DevWrite, DevRead []string
	// Tmp is the run's own TMPDIR, which stands for the plan's tmpfs at
	// /tmp ("" when the run has none).
	Tmp string
}

// Unheld is one kind of step of a plan that Landlock, which grants
// access to the host's own tree and has no mount of its own, cannot hold
// as bwrap does, and where the plan makes it.
type Unheld struct {
	// Name is the area, as llrules.Loss names it ("files", "proc",
	// "processes", "protected_paths").
	Name string
	// What says what the plan does there and what Landlock does instead.
	What string
	// Paths are where the plan makes the steps, in its order, once each:
	// a bind from elsewhere as "DST <- SRC", a tmpfs with its size, /tmp
	// with the TMPDIR that stands for it ("/tmp size=N -> TMPDIR").
	Paths []string
}

// The kinds of Unheld, in the order translate reports them.
const (
	unheldHeld = iota
	unheldPinned
	unheldOver
	unheldCovered
	unheldProcHidden
	unheldProc
	unheldDev
	unheldTmp
	unheldShm
	unheldTmpfs
	unheldMoved
	unheldDir
	unheldKinds
)

// unheldText names and words each kind of Unheld.
var unheldText = [unheldKinds]struct{ name, what string }{
	unheldHeld:       {"protected_paths", "held read-only by a bind onto itself beneath a writable dir: Landlock grants are additive, so it stays writable while the run lasts; package protect keeps a copy and puts it back when the last run on the directory ends"},
	unheldPinned:     {"protected_paths", "bound writable onto itself beneath a writable dir (a nested writable dir, or a directory pinned on the way to a held path): no mount holds it, so it can be renamed or replaced while the run lasts"},
	unheldOver:       {"files", "bound read-only over a writable dir: Landlock cannot take the write grant beneath it back, so that dir stays writable"},
	unheldCovered:    {"files", "covered with /dev/null (a Unix socket or FIFO the search found): Landlock cannot take a granted path back; a FIFO there can be opened (for writing too beneath a writable dir); a Unix socket cannot be connected, seccomp refuses AF_UNIX sockets"},
	unheldProcHidden: {"proc", "hidden (an empty file system or /dev/null over it): the host's is readable where the uid may read it"},
	unheldProc:       {"processes", "a /proc of the sandbox's own PID namespace: Landlock grants the host's /proc read-only, and its processes are visible"},
	unheldDev:        {"files", "a minimal /dev of the sandbox's own: only the device files granted (null, zero, full writable; random, urandom readable) may be opened, the rest of the host's /dev is denied"},
	unheldTmp:        {"files", "a private tmpfs: the run's own TMPDIR is granted writable instead (TMPDIR, and HOME by default, point there; no size cap), the host's /tmp is not granted"},
	unheldShm:        {"files", "a private tmpfs: not granted, the host's is denied (no POSIX shared memory)"},
	unheldTmpfs:      {"files", "an empty file system of the sandbox's own: not there, the host's path is not granted"},
	unheldMoved:      {"files", "bound from another host path: its source is granted where it is on the host, and the destination is the host's own (no mount namespace)"},
	unheldDir:        {"files", "a directory of the sandbox's own: not made"},
}

// translator is translate's state: the input built so far and the unheld
// steps by kind.
type translator struct {
	in     llrules.Input
	f      Facts
	reads  []string // every path granted read, directories and files
	writes []string // every path granted write
	unheld [unheldKinds][]string
}

// translate turns a plan's layout (its Mounts, the run's later binds and
// its Late mounts, in the order they apply) into the Landlock input that
// grants what the layout shows, and names every step it cannot hold. It
// makes no system call: the same steps and facts give the same input.
//
// Guarantees: every path granted is a source the plan bound, the run's
// TMPDIR or a device file of Facts; a read-only step never widens a
// grant; a path is granted once. What the layout denies beneath a grant
// (a held protected path, a covered socket, a hidden /proc entry) stays
// granted and is returned as Unheld: Landlock rules only add.
// ABI and ConnectPorts of the input are the caller's.
func translate(steps []mount.Step, f Facts) (llrules.Input, []Unheld) {
	t := &translator{f: f}
	for i, s := range steps {
		switch s.Kind {
		case mount.ROBind:
			t.roBind(s)
		case mount.Bind:
			t.bind(s)
		case mount.Proc:
			t.grantRead(s.Dst)
			t.note(unheldProc, s.Dst)
		case mount.Dev:
			t.dev(s.Dst)
		case mount.Tmpfs:
			t.tmpfs(s, i+1 < len(steps) && steps[i+1] == mount.Step{Kind: mount.RemountRO, Dst: s.Dst, FD: -1})
		case mount.Dir:
			t.note(unheldDir, s.Dst)
		case mount.Symlink, mount.RemountRO:
			// The host has the same link (the plan recreated the host's),
			// and its target is reached only where it is granted, as
			// inside bwrap. Nothing is writable but the write grants, so
			// a remount read-only holds already.
		}
	}
	var out []Unheld
	for k, paths := range t.unheld {
		if len(paths) > 0 {
			out = append(out, Unheld{Name: unheldText[k].name, What: unheldText[k].what, Paths: paths})
		}
	}
	return t.in, out
}

// note records p under kind once: a path named twice in the plan (a
// --read given twice) is one place Landlock cannot hold.
func (t *translator) note(kind int, p string) {
	if !slices.Contains(t.unheld[kind], p) {
		t.unheld[kind] = append(t.unheld[kind], p)
	}
}

// beneath returns whether p is one of grants or lies beneath one.
func beneath(p string, grants []string) bool {
	return slices.ContainsFunc(grants, func(g string) bool { return policy.Within(p, g) })
}

// roBind translates a read-only bind: a /dev/null cover, a bind from
// elsewhere, or a path shown read-only where it is.
func (t *translator) roBind(s mount.Step) {
	switch {
	case s.Src == "/dev/null" && s.Dst != "/dev/null":
		if policy.Within(s.Dst, "/proc") {
			t.note(unheldProcHidden, s.Dst)
		} else {
			t.note(unheldCovered, s.Dst)
		}
		return
	case s.Src == s.Dst && beneath(s.Dst, t.writes):
		t.note(unheldHeld, s.Dst)
		return
	case slices.ContainsFunc(t.writes, func(w string) bool { return policy.Within(w, s.Dst) }):
		t.note(unheldOver, s.Dst)
	}
	if s.Src != s.Dst {
		t.note(unheldMoved, s.Dst+" <- "+s.Src)
	}
	t.grantRead(s.Src)
}

// bind translates a writable bind.
func (t *translator) bind(s mount.Step) {
	if s.Src != s.Dst {
		t.note(unheldMoved, s.Dst+" <- "+s.Src)
	} else if beneath(s.Dst, t.writes) {
		t.note(unheldPinned, s.Dst)
		return
	}
	t.grantWrite(s.Src)
}

// grantRead grants p read-only, unless a grant already covers it.
func (t *translator) grantRead(p string) {
	if beneath(p, t.reads) || beneath(p, t.writes) {
		return
	}
	t.reads = append(t.reads, p)
	if t.f.Files[p] {
		t.in.ReadFiles = append(t.in.ReadFiles, p)
	} else {
		t.in.ReadDirs = append(t.in.ReadDirs, p)
	}
}

// grantWrite grants p writable, unless a write grant already covers it.
func (t *translator) grantWrite(p string) {
	if beneath(p, t.writes) {
		return
	}
	t.writes = append(t.writes, p)
	if t.f.Files[p] {
		t.in.WriteFiles = append(t.in.WriteFiles, p)
	} else {
		t.in.WriteDirs = append(t.in.WriteDirs, p)
	}
}

// dev grants the harmless device files that stand for the sandbox's own
// /dev at dst.
func (t *translator) dev(dst string) {
	for _, d := range t.f.DevWrite {
		if !slices.Contains(t.in.WriteFiles, d) {
			t.in.WriteFiles = append(t.in.WriteFiles, d)
		}
	}
	for _, d := range t.f.DevRead {
		if !slices.Contains(t.in.ReadFiles, d) {
			t.in.ReadFiles = append(t.in.ReadFiles, d)
		}
	}
	t.note(unheldDev, dst)
}

// tmpfs translates a file system of the sandbox's own: /tmp becomes the
// run's TMPDIR; an empty read-only one under /proc hides an entry
// (hiding, with the remount that follows it).
func (t *translator) tmpfs(s mount.Step, hiding bool) {
	where := s.Dst
	if s.Size > 0 {
		where += " size=" + strconv.FormatInt(s.Size, 10)
	}
	switch {
	case hiding && policy.Within(s.Dst, "/proc"):
		t.note(unheldProcHidden, s.Dst)
	case s.Dst == "/tmp" && t.f.Tmp != "":
		t.grantWrite(t.f.Tmp)
		t.note(unheldTmp, where+" -> "+t.f.Tmp)
	case s.Dst == "/dev/shm":
		t.note(unheldShm, where)
	default:
		t.note(unheldTmpfs, where)
	}
}
