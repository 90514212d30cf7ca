package limits

import (
	"cmp"
	"fmt"
	"syscall"
	"unsafe"
)

// An Exec is a command prepared to replace the calling process under a set
// of rlimits: NewExec does everything that allocates, Run sets the limits
// and executes the command with nothing in between but system calls.
//
// The split is why it exists. A Go process holds some 100 MiB of private
// writable mappings before it allocates anything (the heap arena and its
// index; more under the race detector), which is above RLIMIT_DATA for
// any memory limit under about 60M. Once such a limit is set, any
// allocation that needs a fresh mapping ends the process with "fatal
// error: runtime: cannot allocate memory" and status 2, which would pass
// for the command's own; RLIMIT_NPROC does the same to a new thread. Apply
// followed by syscall.Exec allocates in between (the argument vectors),
// and did so fail about once in 200 runs.
//
// The zero value is not usable; an Exec is used once.
type Exec struct {
	set  []setting
	path *byte
	argv []*byte
	env  []*byte
}

// setting is one resolved Rlimit: its number and the value Run sets.
type setting struct {
	res   Resource
	n     int
	value syscall.Rlimit
}

// NewExec prepares path to be executed with argv and env under rs, which
// Run applies as Apply does: only ever tightening, a value above the
// current hard limit lowered to it. It returns an error wrapping ErrInvalid
// for an unknown resource or a soft value above its hard one, and
// syscall.EINVAL when a string holds a NUL byte.
func NewExec(rs []Rlimit, path string, argv, env []string) (*Exec, error) {
	x := &Exec{set: make([]setting, 0, len(rs))}
	for _, r := range rs {
		n, ok := resourceNumber[r.Resource]
		if !ok {
			return nil, fmt.Errorf("limits: exec under %s: unknown resource: %w", r.Resource, ErrInvalid)
		}
		if r.Soft > r.Hard {
			return nil, fmt.Errorf("limits: exec under %s: soft %d above hard %d: %w", r.Resource, r.Soft, r.Hard, ErrInvalid)
		}
		var cur syscall.Rlimit
		if err := syscall.Getrlimit(n, &cur); err != nil {
			return nil, fmt.Errorf("limits: exec under %s: getrlimit: %w", r.Resource, err)
		}
		x.set = append(x.set, setting{res: r.Resource, n: n, value: syscall.Rlimit{Cur: min(r.Soft, cur.Max), Max: min(r.Hard, cur.Max)}})
	}
	var err error
	if x.path, err = syscall.BytePtrFromString(path); err != nil {
		return nil, err
	}
	if x.argv, err = syscall.SlicePtrFromStrings(argv); err != nil {
		return nil, err
	}
	if x.env, err = syscall.SlicePtrFromStrings(env); err != nil {
		return nil, err
	}
	return x, nil
}

// Run sets the limits, in the order given, and executes the command. It
// returns only on failure: failed is the resource whose limit the kernel
// refused, or "" when execve itself failed, and err is the errno. Once
// the first limit is set, neither Run nor the values it returns allocate
// (an Errno's Error is a constant string for every errno Linux defines),
// so a caller can report them with os.File.WriteString under whatever
// limits are set.
//
// Before the first limit, Run restores the soft RLIMIT_NOFILE the process
// started with, as syscall.Exec does (the Go runtime raises it at start-up);
// a limit in the set then replaces it.
func (x *Exec) Run() (failed Resource, err syscall.Errno) {
	restoreNoFile()
	if failed, errno := x.apply(); errno != 0 {
		return failed, errno
	}
	// What syscall.Exec does after its allocations, but for
	// runtime_BeforeExec: that lock keeps a new thread from being cloned
	// during the execve, whose only effect on Linux (go.dev/issue/19546)
	// is that a set-uid bit may not be honoured: the command gets less,
	// never more. Nothing here starts a thread.
	_, _, errno := syscall.RawSyscall(syscall.SYS_EXECVE,
		uintptr(unsafe.Pointer(x.path)),
		uintptr(unsafe.Pointer(&x.argv[0])),
		uintptr(unsafe.Pointer(&x.env[0])))
	return "", errno
}

// apply sets the limits in order and stops at the first the kernel
// refuses. It allocates nothing.
func (x *Exec) apply() (failed Resource, err syscall.Errno) {
	for i := range x.set {
		s := &x.set[i]
		if e := syscall.Setrlimit(s.n, &s.value); e != nil {
			errno, _ := e.(syscall.Errno)
			return s.res, cmp.Or(errno, syscall.EINVAL)
		}
	}
	return "", 0
}

// restoreNoFile puts the soft RLIMIT_NOFILE back to the value this process
// started with. The Go runtime raises it at start-up and keeps the
// original where only syscall.Exec (and os/exec, in its children) reaches
// it: syscall.Exec restores it before it calls execve, and execve of the
// empty path then fails at once (ENOENT) without looking up a file.
func restoreNoFile() {
	syscall.Exec("", nil, nil)
}
