package sandbox

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/sandbox-run/sandbox-run/bwrap"
	"github.com/sandbox-run/sandbox-run/internal/exitcode"
	"github.com/sandbox-run/sandbox-run/internal/fault"
	"github.com/sandbox-run/sandbox-run/internal/limits"
	"github.com/sandbox-run/sandbox-run/internal/mechanism"
	"github.com/sandbox-run/sandbox-run/internal/plan"
	"github.com/sandbox-run/sandbox-run/pathguard"
	"github.com/sandbox-run/sandbox-run/policy"
)

func nativeMechanism(p policy.Policy, cmd []string, opts Options) (mechanism.Mechanism, error) {
	return bwrapMechanism(p, cmd, opts)
}

func seatbeltMechanism(policy.Policy, []string, Options) (mechanism.Mechanism, error) {
	return nil, fmt.Errorf("sandbox: --sandbox seatbelt exists only on macOS (%w); fix: leave out --sandbox: auto picks what this system has", ErrUnsupported)
}

// Descriptor numbers as bwrap and init see them: ExtraFiles[i] is fd 3+i.
const (
	fdArgs    = 3 // --args stream, consumed by bwrap
	fdStatus  = 4 // init's status line, closed by init before the command runs
	fdStderr  = 5 // the real stderr, which init makes the command's fd 2
	fdInfo    = 6 // bwrap --info-fd, written by bwrap outside the sandbox
	fdInit    = 7 // the init binary (O_PATH, openInit), executed by bwrap
	fdSeccomp = 8 // the seccomp program, consumed by bwrap
	fdBinds   = 9 // first descriptor of the bind plan
)

// tool names a mechanism's binary for findTool's messages.
type tool struct{ name, flag, install string }

var (
	toolBwrap = tool{"bwrap", "--bwrap", "install bubblewrap (apt-get install -y bubblewrap, dnf install bubblewrap) or pass --bwrap PATH" + bwrap.LandlockFix}
	toolRunsc = tool{"runsc", "--runsc", "install gVisor (apt-get install -y runsc) or pass --runsc PATH"}
)

// findBwrap resolves the bwrap to use, refusing one inside a writable dir.
func findBwrap(rv *pathguard.Resolver, want string, writable []string) (string, error) {
	return findTool(rv, toolBwrap, want, writable)
}

// findTool resolves a mechanism's binary: want, or t.name on PATH; one
// that lies in a writable directory (as named or resolved) is refused:
// the command could replace it for the next run. Links are resolved
// through rv's memo (nil: none).
func findTool(rv *pathguard.Resolver, t tool, want string, writable []string) (string, error) {
	path := want
	if path == "" {
		var err error
		path, err = lookPath(t.name, os.Getenv("PATH"), isExecutable)
		if err != nil {
			return "", &SetupError{What: t.name + " not found", Why: "no " + t.name + " on PATH", Fix: t.install}
		}
	}
	abs, err := filepath.Abs(path)
	if err != nil {
		return "", &SetupError{What: t.name + " path " + path, Why: err.Error(), Fix: "pass an absolute " + t.flag + " PATH"}
	}
	real, err := resolveTool(rv, abs)
	if err != nil {
		return "", &SetupError{What: t.name + " not found at " + abs, Why: fault.Reason(err), Fix: strings.Replace(t.install, ", dnf install bubblewrap", "", 1)}
	}
	for _, w := range writable {
		wr, ok := resolvedPath(rv, w)
		if !ok {
			wr = w
		}
		for _, cand := range []string{abs, real} {
			if policy.Within(cand, w) || policy.Within(cand, wr) {
				return "", &SetupError{What: t.name + " " + abs + " lies in writable directory " + w,
					Why: "the sandboxed command could replace it for the next run",
					Fix: "use a " + t.name + " outside every --workdir and --write dir, such as /usr/bin/" + t.name}
			}
		}
	}
	return real, nil
}

// lookPath is exec.LookPath(name) with PATH as path, each directory
// tried once: a directory named again on PATH (a profile that prepends
// what is already there) was already found not to hold name, so trying
// it again changes nothing but the cost. The first match wins and must be
// an executable file, as LookPath checks it; one in a relative directory
// is refused with exec.ErrDot, as LookPath refuses it. check is the test
// of one file (isExecutable).
func lookPath(name, path string, check func(string) error) (string, error) {
	if strings.Contains(name, "/") {
		return exec.LookPath(name)
	}
	tried := map[string]bool{}
	for _, dir := range filepath.SplitList(path) {
		if dir == "" {
			dir = "."
		}
		p := filepath.Join(dir, name)
		if tried[p] {
			continue
		}
		tried[p] = true
		file := p
		if !filepath.IsAbs(p) {
			file = "./" + p // a name with a slash is checked, not searched
		}
		if check(file) != nil {
			continue
		}
		if !filepath.IsAbs(p) {
			return "", &exec.Error{Name: name, Err: exec.ErrDot}
		}
		return p, nil
	}
	return "", &exec.Error{Name: name, Err: exec.ErrNotFound}
}

// isExecutable is exec.LookPath's test of one file: it exists, is not a
// directory, and the effective ids may execute it.
func isExecutable(file string) error {
	_, err := exec.LookPath(file)
	return err
}

// resolveTool is filepath.EvalSymlinks of the absolute, clean abs through
// rv's memo: a missing abs is an error wrapping fs.ErrNotExist.
func resolveTool(rv *pathguard.Resolver, abs string) (string, error) {
	r, err := rv.Resolve(abs)
	if err != nil {
		return "", err
	}
	if !r.Exists {
		return "", &fs.PathError{Op: "lstat", Path: r.Path, Err: fs.ErrNotExist}
	}
	return r.Path, nil
}

func waitCode(ws syscall.WaitStatus) int {
	if ws.Signaled() {
		return exitcode.OfSignal(int(ws.Signal()))
	}
	return ws.ExitStatus()
}

// fullDirs returns the writable directories whose file system is full
// once the command has ended (no block or no inode left for an
// unprivileged writer), so that a command that failed with ENOSPC is
// explained. A file system is named once, by its first directory.
func fullDirs(writable []string) []string {
	var full []string
	seen := map[uint64]bool{}
	for _, dir := range writable {
		var st unix.Stat_t
		var fs unix.Statfs_t
		if unix.Stat(dir, &st) != nil || unix.Statfs(dir, &fs) != nil || seen[st.Dev] {
			continue
		}
		seen[st.Dev] = true
		if fs.Bavail == 0 || (fs.Files > 0 && fs.Ffree == 0) {
			full = append(full, dir)
		}
	}
	return full
}

func orNull(f, null *os.File) *os.File {
	if f != nil {
		return f
	}
	return null
}

// selfPath is the binary bwrap starts as init: this one (see Reexec).
func selfPath(Options) string { return "/proc/self/exe" }

// relay passes bwrap's own stderr on once the command has started, and
// holds it before, so that a setup failure becomes one line of ours.
type relay struct {
	mu      sync.Mutex
	out     *os.File
	started bool
	buf     bytes.Buffer
}

func (r *relay) run(src io.Reader) {
	b := make([]byte, 32<<10)
	for {
		n, err := src.Read(b)
		if n > 0 {
			r.mu.Lock()
			if r.started {
				r.out.Write(b[:n])
			} else if r.buf.Len() < 64<<10 {
				r.buf.Write(b[:n])
			}
			r.mu.Unlock()
		}
		if err != nil {
			return
		}
	}
}

func (r *relay) start() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.started = true
	if r.buf.Len() > 0 {
		r.out.Write(r.buf.Bytes())
		r.buf.Reset()
	}
}

func (r *relay) held() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.buf.String()
}

func quoteAll(a []string) []string {
	out := make([]string, len(a))
	for i, s := range a {
		out[i] = quote(s)
	}
	return out
}

func quote(s string) string {
	if s != "" && !strings.ContainsAny(s, " \t\n'\"\\$`*?[]{}()<>|&;#~!") {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// hostUIDOf reads the real uid of pid as the host sees it: the uid the
// sandbox's processes hold outside their user namespace.
func hostUIDOf(pid int) int {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return -1
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "Uid:"); ok {
			if f := strings.Fields(v); len(f) > 0 {
				n, err := strconv.Atoi(f[0])
				if err == nil {
					return n
				}
			}
		}
	}
	return -1
}

// watchLimits starts whatever watches the run's limits beyond the kernel's
// own: the cgroup's counters (memory and pids events, CPU time from
// cpu.stat) and sampling of the sandbox's process tree for the limits the
// plan left to the sampler. Both can be needed at once: a cgroup without
// the memory controller still sums CPU time, while memory is sampled. It
// returns a nil channel when nothing needs watching, and an error when a
// sampler the plan relies on cannot start: the caller must then end the
// sandbox, since the report would claim a limit nobody holds.
func watchLimits(ctx context.Context, lim limits.Plan, cg *limits.Cgroup, initPID int) (<-chan limits.Exceeded, error) {
	var chans []<-chan limits.Exceeded
	if cg != nil {
		chans = append(chans, cg.Watch(ctx, 10*time.Millisecond))
	}
	if lim.Sample != (limits.Limits{}) {
		// The sandbox's own /tmp and /dev/shm are memory too.
		ch, err := limits.Sample(ctx, initPID, lim.Sample, limits.DefaultInterval, "/tmp", "/dev/shm")
		switch {
		case errors.Is(err, fs.ErrNotExist):
			// The sandbox has already ended: nothing left to hold.
		case err != nil:
			return nil, err
		default:
			chans = append(chans, ch)
		}
	}
	switch len(chans) {
	case 0:
		return nil, nil
	case 1:
		return chans[0], nil
	}
	return firstExceeded(ctx, chans), nil
}

// firstExceeded forwards the first Exceeded any of chans sends and closes
// the result when that is sent, ctx is done, or every one has closed.
func firstExceeded(ctx context.Context, chans []<-chan limits.Exceeded) <-chan limits.Exceeded {
	out := make(chan limits.Exceeded, 1)
	got := make(chan limits.Exceeded, len(chans))
	var wg sync.WaitGroup
	for _, c := range chans {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if e, ok := <-c; ok {
				got <- e
			}
		}()
	}
	all := make(chan struct{})
	go func() { wg.Wait(); close(all) }()
	go func() {
		defer close(out)
		select {
		case e := <-got:
			out <- e
		case <-all:
			select {
			case e := <-got:
				out <- e
			default:
			}
		case <-ctx.Done():
		}
	}()
	return out
}

// classifyLimit says whether a limit ended the run, from what the launcher
// did and what the kernel left behind.
func classifyLimit(lim limits.Plan, cg *limits.Cgroup, code int, killedBy limits.Kind) limits.Kind {
	ev := limits.Evidence{Killed: killedBy, CPULimit: lim.Limits.CPUTime}
	sig, signaled := exitcode.Signal(code)
	ev.Signal = sig
	if cg != nil {
		if e, err := cg.Events(); err == nil {
			ev.OOMKills = e.OOMKills + e.OOMGroupKills
			if killedBy == limits.None && e.Kind() != limits.None && signaled {
				ev.Killed = e.Kind()
			}
		}
		if t, err := cg.CPUTime(); err == nil {
			ev.CPUTime = t
		}
	}
	return limits.Classify(ev)
}

// overheadTasks is added to the pids limit for the sandbox's tasks that are
// not the command's: bwrap's PID 1 and, on the init path, sandbox-run's
// init, a Go program with several threads. The command gets at least the
// limit it asked for, at most this many more.
const overheadTasks = 8

// setupLimits plans how each limit is enforced: a cgroup of the run's own
// where a delegated cgroup v2 offers the controllers, else rlimits and
// sampling. A --cgroup-base that cannot be used is refused, not ignored.
// The process ceiling is policy.DefaultPids and the memory ceiling half
// the host's memory when the policy names none (runLimits).
//
// Pids without a cgroup's pids controller is RLIMIT_NPROC, set inside the
// sandbox's own user namespace: since Linux 5.14 the kernel counts it per
// user namespace and uid, so it holds the sandbox's tasks and nothing of
// the host's (the same uid's other processes, other sandboxes). On older
// kernels it is sampled. The command is never host root, whom the kernel
// would exempt.
func setupLimits(p policy.Policy, runID string) (limits.Plan, *limits.Cgroup, error) {
	l, defMem, err := mechanism.RunLimits(p)
	if err != nil {
		return limits.Plan{}, nil, err
	}
	env := limits.Env{OverheadTasks: overheadTasks, UserNS: limits.NProcPerUserNS(), DefaultMemory: defMem}
	// Every process of the sandbox inherits sandbox-run's own hard
	// RLIMIT_NPROC, and counts against it inside its user namespace: a
	// ceiling above it would be reported at a value that is not the one
	// held. The default comes down to it; one asked for is refused.
	if hard, err := limits.Hard(limits.NProc); err == nil && hard != limits.Infinity && uint64(l.Pids+overheadTasks) > hard {
		if p.Pids > 0 || hard <= 2*overheadTasks {
			return limits.Plan{}, nil, fault.New(fmt.Sprintf("--pids %d cannot be held", l.Pids),
				fmt.Sprintf("sandbox-run's own hard process limit is %d (with %d tasks of sandbox-run's own in the sandbox)", hard, overheadTasks),
				fmt.Sprintf("pass --pids %d or less, or raise the hard limit (ulimit -Hu)", int64(hard)-overheadTasks))
		}
		l.Pids = int64(hard) - overheadTasks
	}
	var base string
	if l.Memory > 0 || l.Pids > 0 || l.CPUTime > 0 {
		b, err := limits.FindDelegated(p.CgroupBase)
		switch {
		case err == nil:
			mem, pids, err := limits.Enabled(b)
			if err == nil {
				base, env.Cgroup, env.CgroupMemory, env.CgroupPids = b, true, mem, pids
			}
		case p.CgroupBase != "":
			return limits.Plan{}, nil, &SetupError{What: "--cgroup-base " + p.CgroupBase, Why: err.Error(),
				Fix: "pass a cgroup v2 directory you may write, with the memory and pids controllers enabled for its children, or drop --cgroup-base"}
		}
	}
	lp, err := limits.NewPlan(l, env)
	if err != nil {
		return limits.Plan{}, nil, &SetupError{What: "limits", Why: err.Error(), Fix: "pass positive limits (--memory of at least 1M, --nofile of at least 4)"}
	}
	if base == "" || lp.Cgroup == (limits.Limits{}) {
		return lp, nil, nil
	}
	cg, err := limits.Create(base, "sandbox-run-"+runID, lp.Cgroup)
	if err != nil {
		return limits.Plan{}, nil, &SetupError{What: "cannot create the run's cgroup in " + base, Why: err.Error(), Fix: "check the delegation of " + base + " or drop --cgroup-base"}
	}
	return lp, cg, nil
}

// shownInside reports whether a host path is visible inside a bwrap
// sandbox under p (plan.ShownInside).
func shownInside(p policy.Policy) func(string) bool { return plan.ShownInside(p) }
