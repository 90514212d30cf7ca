package bwrap

import (
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/sandbox-run/sandbox-run/mount"
)

// ErrNUL is wrapped by the errors of Args and Encode for an argument that
// holds a NUL byte. bwrap reads the --args stream as NUL-terminated strings,
// so such an argument would become two and shift every option after it.
var ErrNUL = errors.New("argument holds a NUL byte, which would resynchronise bwrap's --args stream")

// Spec is everything the argument stream says. It holds no descriptors:
// numbers in it are the ones bwrap will see, which the caller arranges.
type Spec struct {
	// AsPid1 makes the command PID 1 of the sandbox (--as-pid-1); the
	// command must then reap and relay signals itself. False keeps bwrap's
	// own PID 1, which reaps.
	AsPid1           bool
	UnshareCgroupTry bool
	DisableUserns    bool
	// NetMade says the launcher made the network namespace bwrap starts
	// in, owned by a user namespace of its own and holding only lo and
	// the launcher's TUN device (internal/tun's helper): bwrap keeps it
	// instead of unsharing an empty one. Every other namespace is
	// bwrap's as always.
	NetMade    bool
	UID, GID   int // inside ids; -1 leaves bwrap's default (the caller's own)
	Hostname   string
	Mounts     []mount.Step
	Chdir      string
	ClearEnv   bool
	Env        []string // KEY=VALUE
	SeccompFD  int      // -1 = none
	InfoFD     int      // -1 = none
	SizeOption bool     // bwrap knows --size
}

// Args returns the option stream for bwrap --args FD: everything but the
// command. It refuses a NUL byte anywhere (an error wrapping ErrNUL, naming
// the argument's index but not its value, which may be a secret), an
// environment entry that is not KEY=VALUE with a non-empty KEY, and an
// unknown mount kind.
//
// The namespace set is fixed: user, pid, ipc, uts and net are always
// unshared (net by the launcher instead when NetMade), all capabilities dropped, the command in a new session and
// killed with its parent. A Spec cannot ask for less.
func Args(s Spec) ([]string, error) {
	a := namespaceArgs(s)
	for i, m := range s.Mounts {
		var err error
		if a, err = appendMount(a, m, s.SizeOption); err != nil {
			return nil, fmt.Errorf("bwrap: mount %d: %w", i, err)
		}
	}
	if s.ClearEnv {
		a = append(a, "--clearenv")
	}
	for _, kv := range s.Env {
		k, v, ok := strings.Cut(kv, "=")
		if !ok || k == "" {
			return nil, fmt.Errorf("bwrap: environment entry %q is not KEY=VALUE", redactKV(kv))
		}
		a = append(a, "--setenv", k, v)
	}
	if s.SeccompFD >= 0 {
		a = append(a, "--seccomp", strconv.Itoa(s.SeccompFD))
	}
	if s.InfoFD >= 0 {
		a = append(a, "--info-fd", strconv.Itoa(s.InfoFD))
	}
	if s.Chdir != "" {
		a = append(a, "--chdir", s.Chdir)
	}
	if err := checkNUL(a); err != nil {
		return nil, err
	}
	return a, nil
}

// namespaceArgs are the options that fix the sandbox's namespaces, ids
// and lifetime: the part of Args no Spec can weaken.
func namespaceArgs(s Spec) []string {
	a := []string{"--unshare-user", "--unshare-pid", "--unshare-ipc", "--unshare-uts"}
	if !s.NetMade {
		a = append(a, "--unshare-net")
	}
	if s.UnshareCgroupTry {
		a = append(a, "--unshare-cgroup-try")
	}
	if s.DisableUserns {
		a = append(a, "--disable-userns")
	}
	a = append(a, "--cap-drop", "ALL", "--new-session", "--die-with-parent")
	if s.AsPid1 {
		a = append(a, "--as-pid-1")
	}
	if s.UID >= 0 {
		a = append(a, "--uid", strconv.Itoa(s.UID))
	}
	if s.GID >= 0 {
		a = append(a, "--gid", strconv.Itoa(s.GID))
	}
	if s.Hostname != "" {
		a = append(a, "--hostname", s.Hostname)
	}
	return a
}

// appendMount appends m's options to a; sizeOption says whether bwrap
// knows --size (without it a tmpfs has no ceiling from bwrap).
func appendMount(a []string, m mount.Step, sizeOption bool) ([]string, error) {
	switch m.Kind {
	case mount.ROBind, mount.Bind:
		opt := "--ro-bind"
		if m.Kind == mount.Bind {
			opt = "--bind"
		}
		if m.FD >= 0 {
			return append(a, opt+"-fd", strconv.Itoa(m.FD), m.Dst), nil
		}
		return append(a, opt, m.Src, m.Dst), nil
	case mount.Symlink:
		return append(a, "--symlink", m.Src, m.Dst), nil
	case mount.Proc:
		return append(a, "--proc", m.Dst), nil
	case mount.Dev:
		return append(a, "--dev", m.Dst), nil
	case mount.Tmpfs:
		if m.Size > 0 && sizeOption {
			a = append(a, "--size", strconv.FormatInt(m.Size, 10))
		}
		return append(a, "--tmpfs", m.Dst), nil
	case mount.RemountRO:
		return append(a, "--remount-ro", m.Dst), nil
	case mount.Dir:
		return append(a, "--dir", m.Dst), nil
	}
	return nil, fmt.Errorf("unknown kind %v", m.Kind)
}

// Encode joins an option stream the way bwrap --args reads it: each
// argument followed by a NUL, so that bwrap reads back exactly args. An
// argument holding a NUL byte cannot be encoded: Encode then returns nil and
// an error wrapping ErrNUL that names the argument's index (not its value).
func Encode(args []string) ([]byte, error) {
	if err := checkNUL(args); err != nil {
		return nil, err
	}
	n := 0
	for _, s := range args {
		n += len(s) + 1
	}
	b := make([]byte, 0, n)
	for _, s := range args {
		b = append(b, s...)
		b = append(b, 0)
	}
	return b, nil
}

// checkNUL returns an error wrapping ErrNUL for the first argument that
// holds a NUL byte.
func checkNUL(args []string) error {
	for i, arg := range args {
		if strings.IndexByte(arg, 0) >= 0 {
			return fmt.Errorf("bwrap: argument %d: %w", i, ErrNUL)
		}
	}
	return nil
}

// Redact returns a copy of an option stream with every --setenv value
// replaced, for printing.
func Redact(args []string) []string {
	out := append([]string(nil), args...)
	for i := 0; i+2 < len(out); i++ {
		if out[i] == "--setenv" {
			out[i+2] = "<redacted>"
			i += 2
		}
	}
	return out
}

func redactKV(kv string) string {
	if k, _, ok := strings.Cut(kv, "="); ok {
		return k + "=<redacted>"
	}
	return "<redacted>"
}
