package initproc

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net"
	"os"
	"os/exec"
	"os/signal"
	"runtime"
	"strconv"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"

	"github.com/sandbox-run/sandbox-run/forwarder"
	"github.com/sandbox-run/sandbox-run/internal/connbroker"
	"github.com/sandbox-run/sandbox-run/internal/exitcode"
	"github.com/sandbox-run/sandbox-run/internal/limits"
)

// Main runs init with args (those after Arg) and returns its exit status.
// It is meant to be the whole of the process's life: call it from main and
// os.Exit with its result.
func Main(args []string) int {
	c, err := ParseArgs(args)
	if err != nil {
		// No status descriptor to speak on: bwrap's stderr reaches the
		// outer sandbox-run, which reports a setup failure.
		os.Stderr.WriteString("sandbox-run init: " + err.Error() + "\n")
		return exitcode.Setup
	}
	// Nothing above 2 may reach the command: whatever bwrap or the caller
	// left open is closed at exec. The status and stderr descriptors are
	// used by init itself until then.
	if err := unix.CloseRange(3, ^uint(0), unix.CLOSE_RANGE_CLOEXEC); err != nil {
		markAllCloexec()
	}
	status, err := statusOf(c)
	if err != nil {
		os.Stderr.WriteString("sandbox-run init: " + err.Error() + "\n")
		return exitcode.Setup
	}
	stderr := os.NewFile(uintptr(c.StderrFD), "stderr")
	report := func(s Status) {
		b, _ := json.Marshal(s)
		status.Write(append(b, '\n'))
		status.Close()
	}
	if os.Getpid() != 1 {
		report(Status{Error: "init is not PID 1 of its own PID namespace", Exit: exitcode.Setup})
		return exitcode.Setup
	}
	// The host's OOM killer ends the sandbox before anything of the
	// host's: init and the command it starts, which inherits the value.
	// The launcher reads it back from the host.
	if err := limits.RaiseOOMScore(); err != nil {
		report(Status{Error: err.Error(), Exit: exitcode.Setup})
		return exitcode.Setup
	}

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	if err := prepare(ctx, c, status); err != nil {
		report(Status{Error: err.Error(), Exit: exitcode.Setup})
		return exitcode.Setup
	}
	rb := readback(c.StatusSocket != "")
	// Signals are caught before the command starts so that none sent
	// in between is lost.
	sigs := make(chan os.Signal, 8)
	signal.Notify(sigs, unix.SIGINT, unix.SIGTERM, unix.SIGHUP, unix.SIGQUIT, unix.SIGUSR1, unix.SIGUSR2)

	pid, st := start(c, rb)
	if !st.Started {
		report(st)
		return st.Exit
	}
	stderr.Close()
	report(st)
	go relay(sigs, pid)
	return reap(pid)
}

// prepare does what must be in place before the command starts: the
// forwarders, the published ports, the TUN device, and, with a gate,
// "ready" on status and the launcher's "go".
func prepare(ctx context.Context, c Config, status *os.File) error {
	for _, f := range c.Forward {
		if err := startForward(ctx, f); err != nil {
			return err
		}
	}
	for _, f := range c.Publish {
		if err := forwarder.Publish(ctx, f.Socket, f.Port); err != nil {
			return err
		}
	}
	if err := setUpTun(c.Tun); err != nil {
		return err
	}
	if c.GateFD <= 2 {
		return nil
	}
	// "ready" first: the launcher knows init runs (so the user namespace
	// the command will have is complete) and sets what it sets from
	// outside, such as the inotify ceiling, before "go".
	status.WriteString("ready\n")
	return waitGate(c.GateFD)
}

// start starts the command as c says, with the real standard error, and
// returns its pid and the status to report: started (with rb), or why it
// could not start (127 not found, 126 not executable).
func start(c Config, rb *Readback) (int, Status) {
	path, err := exec.LookPath(c.Command[0])
	if err != nil {
		code := exitcode.NotFound
		if errors.Is(err, fs.ErrPermission) {
			code = exitcode.NotExecutable
		}
		why := lookError(err)
		return 0, Status{Error: c.Command[0] + ": " + why, Reason: why, Exit: code, Readback: rb}
	}
	// syscall.ForkExec rather than os.StartProcess: the latter first forks
	// a throwaway child to probe pidfd support, a cost on every launch.
	attr := &syscall.ProcAttr{
		Env:   os.Environ(),
		Files: []uintptr{0, 1, uintptr(c.StderrFD)},
		Sys:   &syscall.SysProcAttr{Setpgid: true},
	}
	if c.TTY {
		// Setsid makes the command its own group too, so the signal relay
		// (to -pid) is unchanged.
		attr.Sys = &syscall.SysProcAttr{Setsid: true, Setctty: true, Ctty: 0}
	}
	// Core dumps are off for init and everything below it. Any other
	// rlimit is set on the way to the command (execPlan), so that init
	// keeps its own descriptors and CPU for relaying.
	limits.Apply([]limits.Rlimit{{Resource: limits.Core}})
	// A host without /bin/sh (the sandbox shows the host's) still runs
	// the command, through the exec shim.
	exe, argv := execPlan(c.Rlimits, path, c.Command, unix.Access("/bin/sh", unix.X_OK) == nil, c.BrokerFD > 2)
	if c.BrokerFD > 2 {
		attr.Files = append(attr.Files, uintptr(c.BrokerFD)) // the shim's descriptor 3
	}
	pid, err := syscall.ForkExec(exe, argv, attr)
	if c.BrokerFD > 2 {
		// The shim holds it now: the launcher sees its end of file if the
		// shim dies before it writes.
		unix.Close(c.BrokerFD)
	}
	if err != nil {
		code := exitcode.NotExecutable
		if errors.Is(err, fs.ErrNotExist) {
			code = exitcode.NotFound
		}
		return 0, Status{Error: c.Command[0] + ": " + err.Error(), Reason: err.Error(), Exit: code, Readback: rb}
	}
	return pid, Status{Started: true, Readback: rb}
}

// relay passes each signal init catches to the command's process group,
// so a shell's children hear it too, and then to the command itself in
// case it left its group.
func relay(sigs <-chan os.Signal, pid int) {
	for s := range sigs {
		unix.Kill(-pid, s.(syscall.Signal))
		unix.Kill(pid, s.(syscall.Signal))
	}
}

// reap waits for the command, reaping every orphan reparented to init on
// the way, and returns the command's status (128+N for a signal); 125 if
// waiting fails.
func reap(pid int) int {
	for {
		var ws unix.WaitStatus
		got, err := unix.Wait4(-1, &ws, 0, nil)
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return exitcode.Setup
		}
		if got != pid {
			continue // an orphan reparented to init
		}
		switch {
		case ws.Exited():
			return ws.ExitStatus()
		case ws.Signaled():
			return exitcode.OfSignal(int(ws.Signal()))
		}
	}
}

func lookError(err error) string {
	var ee *exec.Error
	if errors.As(err, &ee) {
		if errors.Is(ee.Err, exec.ErrNotFound) {
			return "command not found"
		}
		return ee.Err.Error()
	}
	return err.Error()
}

// markAllCloexec is the fallback for kernels before 5.11 without
// CLOSE_RANGE_CLOEXEC.
func markAllCloexec() {
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		return
	}
	for _, e := range ents {
		fd, err := strconv.Atoi(e.Name())
		if err == nil && fd > 2 {
			unix.CloseOnExec(fd)
		}
	}
}

// readback reads what the kernel says of init's confinement; with kernel,
// also which kernel it is (tier 2, where it is gVisor's).
func readback(kernel bool) *Readback {
	rb := &Readback{PID: os.Getpid(), UID: os.Getuid(), GID: os.Getgid(), NoNewPrivs: -1, Seccomp: -1, Namespaces: map[string]string{}}
	if kernel {
		rb.Kernel = readKernel()
	}
	if b, err := os.ReadFile("/proc/self/status"); err == nil {
		rb.ParseStatus(b)
	}
	if b, err := os.ReadFile("/proc/self/uid_map"); err == nil {
		rb.UIDMap = strings.Join(strings.Fields(string(b)), " ")
	}
	for _, ns := range []string{"user", "mnt", "pid", "net", "ipc", "uts", "cgroup"} {
		if l, err := os.Readlink("/proc/self/ns/" + ns); err == nil {
			rb.Namespaces[ns] = l
		}
	}
	return rb
}

// startForward listens on 127.0.0.1:f.Port, and on [::1]:f.Port where the
// sandbox has IPv6, and relays to f.Socket. The listeners exist before the
// command starts, so its first connection finds them.
func startForward(ctx context.Context, f Forward) error {
	if f.Addr != "" {
		ln, err := net.Listen("tcp", net.JoinHostPort(f.Addr, strconv.Itoa(f.Port)))
		if err != nil {
			return fmt.Errorf("forward %s: %w", net.JoinHostPort(f.Addr, strconv.Itoa(f.Port)), err)
		}
		go forwarder.Serve(ctx, ln, f.Socket)
		return nil
	}
	ln, err := net.Listen("tcp4", net.JoinHostPort("127.0.0.1", strconv.Itoa(f.Port)))
	if err != nil {
		return fmt.Errorf("forward 127.0.0.1:%d: %w", f.Port, err)
	}
	go forwarder.Serve(ctx, ln, f.Socket)
	if ln6, err := net.Listen("tcp6", net.JoinHostPort("::1", strconv.Itoa(f.Port))); err == nil {
		go forwarder.Serve(ctx, ln6, f.Socket)
	}
	return nil
}

// ExecMain is the exec shim: args are RLIMITS PATH ARGV0 [ARG...]. It
// raises its oom_score_adj to limits.OOMScoreAdj, lets SIGXFSZ be ignored (so that a write past --fsize fails with EFBIG
// instead of killing the writer), closes every descriptor above 2 on
// exec, and becomes the command under the rlimits. They are set last, by
// limits.Exec, with nothing that allocates between them and the execve:
// the shim's own Go runtime is above most RLIMIT_DATA values the command
// may get. It returns only on failure.
func ExecMain(args []string) int {
	broker := len(args) > 0 && args[0] == BrokerMark
	if broker {
		args = args[1:]
	}
	if len(args) < 3 {
		os.Stderr.WriteString("sandbox-run exec: usage\n")
		return exitcode.Setup
	}
	rl, err := parseRlimits(args[0])
	var x *limits.Exec
	if err == nil {
		// The command inherits it: the host's OOM killer ends it first.
		err = limits.RaiseOOMScore()
	}
	if err == nil {
		x, err = limits.NewExec(rl, args[1], args[2:], os.Environ())
	}
	if err != nil {
		os.Stderr.WriteString("sandbox-run exec: " + err.Error() + "\n")
		return exitcode.Setup
	}
	if broker {
		if err := installBroker(); err != nil {
			os.Stderr.WriteString("sandbox-run exec: " + err.Error() + "\n")
			return exitcode.Setup
		}
	}
	signal.Ignore(unix.SIGXFSZ)
	// Nothing above 2 reaches the command, whatever the shim inherited
	// (tier 0 runs through here with no init to sweep for it).
	if err := unix.CloseRange(3, ^uint(0), unix.CLOSE_RANGE_CLOEXEC); err != nil {
		markAllCloexec()
	}
	failed, errno := x.Run()
	return ExecFailed("sandbox-run exec: ", args[1], failed, errno)
}

// installBroker puts the connect broker's filter on this thread, which
// it locks (the command is executed from it and inherits the filter),
// and hands the listener over on descriptor 3, then closes it. A filter
// that cannot go on is declined to the launcher (the report says why)
// and the command runs with its connections on the netstack's path; an
// error once it is on ends the shim, since its connects would wait for
// a listener nobody serves.
func installBroker() error {
	runtime.LockOSThread()
	defer unix.Close(3)
	err := connbroker.Install(3)
	var ni *connbroker.NotInstalledError
	if errors.As(err, &ni) {
		return connbroker.Decline(3, err)
	}
	return err
}

// ExecFailed reports a limits.Exec's Run that returned, on standard
// error, as prefix, then "rlimit RESOURCE" or name (the command), then the
// errno, and returns the exit status for it: 125 for a limit the kernel
// refused (a set-up failure: it only ever lowers them), 127 for a command
// that does not exist, 126 otherwise. It writes strings that exist and
// allocates nothing, since the process is under the command's limits.
func ExecFailed(prefix, name string, failed limits.Resource, errno syscall.Errno) int {
	w := os.Stderr
	w.WriteString(prefix)
	code := exitcode.NotExecutable
	switch {
	case failed != "":
		w.WriteString("rlimit ")
		w.WriteString(string(failed))
		code = exitcode.Setup
	default:
		w.WriteString(name)
		if errno == unix.ENOENT {
			code = exitcode.NotFound
		}
	}
	w.WriteString(": ")
	w.WriteString(errno.Error())
	w.WriteString("\n")
	return code
}

// statusOf opens where init reports: the status descriptor, or a
// connection to the status socket (tier 2, where no descriptor but 0-2
// crosses into the sandbox).
func statusOf(c Config) (*os.File, error) {
	if c.StatusSocket == "" {
		return os.NewFile(uintptr(c.StatusFD), "status"), nil
	}
	conn, err := net.Dial("unix", c.StatusSocket)
	if err != nil {
		return nil, fmt.Errorf("status socket: %w", err)
	}
	defer conn.Close()
	f, err := conn.(*net.UnixConn).File()
	if err != nil {
		return nil, fmt.Errorf("status socket: %w", err)
	}
	unix.CloseOnExec(int(f.Fd()))
	return f, nil
}

// readKernel reads what the kernel serving init says it is.
func readKernel() *Kernel {
	k := &Kernel{}
	var u unix.Utsname
	if unix.Uname(&u) == nil {
		k.Uname = strings.Join([]string{unix.ByteSliceToString(u.Sysname[:]), unix.ByteSliceToString(u.Release[:]),
			unix.ByteSliceToString(u.Version[:]), unix.ByteSliceToString(u.Machine[:])}, " ")
	}
	if b, err := os.ReadFile("/proc/version"); err == nil {
		k.ProcVersion, _, _ = strings.Cut(strings.TrimSpace(string(b)), "\n")
	}
	buf := make([]byte, 4096)
	// SYSLOG_ACTION_READ_ALL; the host kernel refuses it to the
	// unprivileged (dmesg_restrict), gVisor answers with its own log.
	if n, err := unix.Klogctl(3, buf); err == nil && n > 0 {
		k.Dmesg, _, _ = strings.Cut(strings.TrimSpace(string(buf[:n])), "\n")
	}
	return k
}

// waitGate blocks until the launcher writes "go" on fd (Config.GateFD),
// then closes it.
func waitGate(fd int) error {
	f := os.NewFile(uintptr(fd), "gate")
	defer f.Close()
	b := make([]byte, 3)
	n, _ := io.ReadFull(f, b)
	if string(b[:n]) != "go\n" {
		return errors.New("the launcher did not let the command start (init's gate closed)")
	}
	return nil
}
