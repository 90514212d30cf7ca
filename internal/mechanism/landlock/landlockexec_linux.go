package landlock

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"runtime"
	"strconv"
	"strings"
	"unsafe"

	llsys "github.com/landlock-lsm/go-landlock/landlock/syscall"
	"golang.org/x/sys/unix"

	"github.com/sandbox-run/sandbox-run/internal/exitcode"
	"github.com/sandbox-run/sandbox-run/internal/initproc"
	"github.com/sandbox-run/sandbox-run/internal/limits"
	llrules "github.com/sandbox-run/sandbox-run/landlock"
)

// Arg is the hidden mode of the exec shim that confines itself
// with Landlock and the seccomp filter and becomes the command.
const Arg = "__sandbox-landlock"

// Descriptors of the landlock shim: ExtraFiles[i] is fd 3+i.
const (
	llFdSpec   = 3 // the landlockSpec as JSON, read to EOF
	llFdStatus = 4 // the shim's one status line, closed by exec
)

// landlockSpec is everything the shim needs; it travels on a pipe, never
// on an argv that ps shows.
type landlockSpec struct {
	Input   llrules.Input   `json:"input"`
	Filter  []byte          `json:"filter"`
	Rlimits []limits.Rlimit `json:"rlimits"`
	Path    string          `json:"path"`
	Argv    []string        `json:"argv"`
	Env     []string        `json:"env"`
}

// Main is the shim: it reads its spec, sets no_new_privs,
// restricts itself with the Landlock ruleset on this thread (the only one
// that runs on until exec, which ends the others), installs the seccomp
// filter, reads back what holds, closes every other descriptor and execs
// the command with exactly the spec's environment under the rlimits. Its
// status line ("ok ..." or "error ...") tells the supervisor which. The
// rlimits come last, from limits.Exec, with nothing that allocates between
// them and the execve: the shim's Go runtime is above most RLIMIT_DATA
// values the command may get.
func Main() int {
	status := os.NewFile(llFdStatus, "status")
	fail := func(what string, err error) int {
		fmt.Fprintf(status, "error %s: %v\n", what, err)
		return exitcode.Setup
	}
	var spec landlockSpec
	// Closed through its *os.File, never by number: the File's finalizer
	// would close the number again at some later GC, by then another
	// descriptor of the shim's (the ruleset, a rule's path, a /proc file).
	specFile := os.NewFile(llFdSpec, "spec")
	b, err := io.ReadAll(io.LimitReader(specFile, 16<<20))
	if err == nil {
		err = json.Unmarshal(b, &spec)
	}
	specFile.Close()
	if err != nil || len(spec.Argv) == 0 {
		return fail("reading the spec", err)
	}
	// Before the ruleset, which would refuse the write: the command
	// inherits it, so the host's OOM killer ends it first.
	if err := limits.RaiseOOMScore(); err != nil {
		return fail("oom_score_adj", err)
	}
	x, err := limits.NewExec(spec.Rlimits, spec.Path, spec.Argv, spec.Env)
	if err != nil {
		return fail("rlimits", err)
	}
	runtime.LockOSThread() // never unlocked: this thread execs
	signal.Ignore(unix.SIGXFSZ)
	if err := confine(spec); err != nil {
		return fail("confining", err)
	}
	if err := unix.CloseRange(llFdStatus+1, ^uint(0), unix.CLOSE_RANGE_CLOEXEC); err != nil {
		return fail("close_range", err)
	}
	unix.CloseOnExec(llFdStatus)
	fmt.Fprintf(status, "ok %s\n", readbackLine())
	failed, errno := x.Run()
	return initproc.ExecFailed("sandbox-run: ", spec.Argv[0], failed, errno)
}

// confine applies no_new_privs, the Landlock ruleset and the seccomp
// filter to the calling thread, in that order.
func confine(spec landlockSpec) error {
	rs, err := llrules.Translate(spec.Input)
	if err != nil {
		return err
	}
	fd, flags, err := rs.Config.NewRulesetFD(rs.Rules...)
	if err != nil {
		return err
	}
	if fd < 0 {
		return errors.New("the ruleset restricts nothing")
	}
	defer unix.Close(fd)
	if err := unix.Prctl(unix.PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0); err != nil {
		return fmt.Errorf("no_new_privs: %w", err)
	}
	if err := llsys.LandlockRestrictSelf(fd, flags); err != nil {
		return fmt.Errorf("landlock_restrict_self: %w", err)
	}
	if len(spec.Filter) == 0 || len(spec.Filter)%8 != 0 {
		return errors.New("no seccomp program")
	}
	prog := unix.SockFprog{Len: uint16(len(spec.Filter) / 8), Filter: (*unix.SockFilter)(unsafe.Pointer(&spec.Filter[0]))}
	if _, _, e := unix.RawSyscall(unix.SYS_SECCOMP, unix.SECCOMP_SET_MODE_FILTER, 0, uintptr(unsafe.Pointer(&prog))); e != 0 {
		return fmt.Errorf("seccomp: %w", e)
	}
	runtime.KeepAlive(spec.Filter)
	return nil
}

// readbackLine is what holds on the shim's thread just before exec:
// NoNewPrivs and Seccomp from /proc/thread-self/status, and whether "/" is
// closed to it (Landlock in force: / itself is granted to no rule). The
// status is read as init reads its own (initproc.Readback.ParseStatus).
func readbackLine() string {
	rb := initproc.Readback{NoNewPrivs: -1, Seccomp: -1}
	if b, err := os.ReadFile("/proc/thread-self/status"); err == nil {
		rb.ParseStatus(b)
	}
	nnp, sc := strconv.Itoa(rb.NoNewPrivs), strconv.Itoa(rb.Seccomp)
	root := "open"
	if fd, err := unix.Open("/", unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0); err == nil {
		unix.Close(fd)
	} else if errors.Is(err, unix.EACCES) {
		root = "denied"
	}
	return "nnp=" + nnp + " seccomp=" + sc + " root=" + root
}

// parseReadback parses readbackLine's form; ok says whether every part
// shows the confinement in force.
func parseReadback(s string) (nnp, seccomp int, rootDenied, ok bool) {
	nnp, seccomp = -1, -1
	for _, f := range strings.Fields(s) {
		k, v, _ := strings.Cut(f, "=")
		switch k {
		case "nnp":
			nnp, _ = strconv.Atoi(v)
		case "seccomp":
			seccomp, _ = strconv.Atoi(v)
		case "root":
			rootDenied = v == "denied"
		}
	}
	return nnp, seccomp, rootDenied, nnp == 1 && seccomp == 2 && rootDenied
}
