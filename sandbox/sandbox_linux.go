package sandbox

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/sandbox-run/sandbox-run/bwrap"
	"github.com/sandbox-run/sandbox-run/filter"
	"github.com/sandbox-run/sandbox-run/internal/initproc"
	"github.com/sandbox-run/sandbox-run/internal/limits"
	"github.com/sandbox-run/sandbox-run/policy"
)

func runNative(ctx context.Context, p policy.Policy, cmd []string, opts Options) (*Result, error) {
	return runBwrap(ctx, p, cmd, opts)
}

func runSeatbelt(context.Context, policy.Policy, []string, Options) (*Result, error) {
	return nil, fmt.Errorf("sandbox: --sandbox seatbelt exists only on macOS (%w); fix: leave out --sandbox: auto picks what this system has", ErrUnsupported)
}

// Descriptor numbers as bwrap and init see them: ExtraFiles[i] is fd 3+i.
const (
	fdArgs    = 3 // --args stream, consumed by bwrap
	fdStatus  = 4 // init's status line, closed by init before the command runs
	fdStderr  = 5 // the real stderr, which init makes the command's fd 2
	fdInfo    = 6 // bwrap --info-fd, written by bwrap outside the sandbox
	fdInit    = 7 // sandbox-run itself (O_PATH), executed as init
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
func findBwrap(want string, writable []string) (string, error) {
	return findTool(toolBwrap, want, writable)
}

// findTool resolves a mechanism's binary: want, or t.name on PATH; one
// that lies in a writable directory (as named or resolved) is refused:
// the command could replace it for the next run.
func findTool(t tool, want string, writable []string) (string, error) {
	path := want
	if path == "" {
		var err error
		path, err = exec.LookPath(t.name)
		if err != nil {
			return "", &SetupError{What: t.name + " not found", Why: "no " + t.name + " on PATH", Fix: t.install}
		}
	}
	abs, err := filepath.Abs(path)
	if err != nil {
		return "", &SetupError{What: t.name + " path " + path, Why: err.Error(), Fix: "pass an absolute " + t.flag + " PATH"}
	}
	real, err := filepath.EvalSymlinks(abs)
	if err != nil {
		return "", &SetupError{What: t.name + " not found at " + abs, Why: errText(err), Fix: strings.Replace(t.install, ", dnf install bubblewrap", "", 1)}
	}
	for _, w := range writable {
		wr, err := filepath.EvalSymlinks(w)
		if err != nil {
			wr = w
		}
		for _, cand := range []string{abs, real} {
			if within(cand, w) || within(cand, wr) {
				return "", &SetupError{What: t.name + " " + abs + " lies in writable directory " + w,
					Why: "the sandboxed command could replace it for the next run",
					Fix: "use a " + t.name + " outside every --workdir and --write dir, such as /usr/bin/" + t.name}
			}
		}
	}
	return real, nil
}

func runBwrap(ctx context.Context, p policy.Policy, cmd []string, opts Options) (*Result, error) {
	log := opts.logger()
	procSys := opts.ProcSys
	if procSys == "" {
		procSys = "/proc/sys"
	}
	host := bwrap.ReadHost(procSys)

	path, err := findBwrap(opts.BwrapPath, p.Writable())
	if err != nil {
		return nil, err
	}
	info, err := bwrap.Detector{CacheDir: opts.BwrapCache}.Detect(ctx, path)
	if err != nil {
		return nil, &SetupError{What: "cannot use bwrap " + path, Why: err.Error(),
			Fix: "install bubblewrap (apt-get install -y bubblewrap) or pass --bwrap PATH"}
	}
	if err := info.Required(); err != nil {
		return nil, &SetupError{What: "bwrap too old", Why: err.Error(), Fix: "install bubblewrap 0.4.0 or newer"}
	}
	if err := bwrap.Preflight(host); err != nil {
		return nil, err
	}
	arch, err := filter.NativeArch()
	if err != nil {
		return nil, &SetupError{What: "no seccomp filter for this machine", Why: err.Error(),
			Fix: "run on x86_64 or aarch64, or ask for tier 0 explicitly with --sandbox off"}
	}
	if p.Ptrace {
		if err := filter.CheckPtrace(filter.YamaPtraceScope()); err != nil {
			return nil, &SetupError{What: "--ptrace refused", Why: strings.TrimPrefix(err.Error(), "filter: "),
				Fix: "enable Yama with kernel.yama.ptrace_scope=1 (sysctl -w kernel.yama.ptrace_scope=1), or run without --ptrace"}
		}
	}
	prog, err := filter.Assemble(arch, filter.Options{AllowPtrace: p.Ptrace})
	if err != nil {
		return nil, &SetupError{What: "cannot assemble the seccomp filter", Why: err.Error(), Fix: "report this as a bug in sandbox-run"}
	}

	uid, gid := os.Getuid(), os.Getgid()
	root := os.Geteuid() == 0
	if root {
		uid, gid = p.UID, p.GID
		if uid == 0 {
			return nil, &policy.InvalidError{Field: "user", Reason: "uid 0 is host root", Fix: "pass --user with an unprivileged uid"}
		}
	}

	p, own, err := prepareState(p, opts, uid, gid)
	if err != nil {
		return nil, err
	}
	runID := newRunID()
	pl, pend, err := startProtection(p, opts.BwrapCache, runID, func() (*plan, error) {
		return newPlan(p, own, info.Features.BindFD, fdBinds, uid, gid, info.Features.Size)
	})
	if err != nil {
		return nil, err
	}
	var res *Result
	defer func() { pend.finish(res, opts.Stderr) }()
	if len(p.Read) > 0 {
		log.Debug("searched --read paths for sockets and FIFOs", "entries", pl.scan.entries,
			"elapsed", pl.scan.elapsed, "covered", len(pl.scan.covered))
	}
	defer pl.close()

	nw, err := setupNetwork(ctx, p, uid, gid, root, runID, opts.Audit, log)
	if err != nil {
		return nil, err
	}
	defer nw.close()
	for _, b := range nw.binds {
		if err := pl.bindSocket(b[0], b[1]); err != nil {
			return nil, err
		}
	}

	var tty *terminal
	if opts.Terminal != nil {
		if _, set := p.Env["TERM"]; !set && opts.LookupEnv != nil {
			if term, ok := opts.LookupEnv("TERM"); ok {
				nw.env["TERM"] = term
			}
		}
		var in io.Reader = opts.Terminal
		var out io.Writer = io.Discard
		if opts.Stdin != nil {
			in = opts.Stdin
		}
		if opts.Stdout != nil {
			out = opts.Stdout
		}
		if tty, err = openTerminal(opts.Terminal, in, out); err != nil {
			return nil, err
		}
		// Deferred after the sandbox's own cleanup is registered, so it
		// runs first: the command's last output, then the terminal back.
		defer tty.close()
		opts.Stdin, opts.Stdout, opts.Stderr = tty.slave, tty.slave, tty.slave
	}
	env, err := commandEnv(p, nw.env, opts.LookupEnv)
	if err != nil {
		return nil, err
	}
	env = pl.bindGitHint(p, env, opts.BwrapCache, uid, gid)

	lim, cg, err := setupLimits(p, runID)
	if err != nil {
		return nil, err
	}
	if cg != nil {
		defer cg.Close()
	}
	initCfg := initproc.Config{StatusFD: fdStatus, StderrFD: fdStderr, Forward: nw.forwards, Command: cmd}
	// Init runs only when it has work: forwarding, or rlimits for the exec
	// shim beyond the two the trampoline sets itself (core dumps off and
	// the process ceiling). Otherwise the fast path: bwrap's own PID 1 and
	// a sh trampoline.
	// A terminal needs init too: it makes it the command's controlling one.
	initCfg.TTY = tty != nil
	nproc, shimOnly := trampolineRlimits(lim.Rlimits)
	fast := len(initCfg.Forward) == 0 && !shimOnly && !initCfg.TTY
	if !fast && len(lim.Rlimits) > 0 {
		initCfg.Rlimits = limits.EncodeRlimits(lim.Rlimits)
	}
	var argv []string
	var notRunnable *ExecError // reported once the report exists
	if fast {
		visible := append(append(append([]string(nil), systemPaths...), pl.writable...), pl.readOnly...)
		resolved, err := resolveCommand(cmd[0], p.Workdir, env, visible, uid, gid)
		if err != nil {
			notRunnable, resolved = err.(*ExecError), cmd[0]
		}
		argv = append([]string{path, "--args", fmt.Sprint(fdArgs), "--"}, trampolineArgs(resolved, cmd, nproc)...)
	} else {
		argv = append([]string{path, "--args", fmt.Sprint(fdArgs), "--", fmt.Sprintf("/proc/self/fd/%d", fdInit), initproc.Arg}, initCfg.Args()...)
	}

	spec := bwrap.Spec{
		AsPid1:           !fast,
		UnshareCgroupTry: info.Features.UnshareCgroupTry,
		DisableUserns:    info.Features.DisableUserns,
		UID:              -1, GID: -1,
		Hostname:   "sandbox",
		Mounts:     append(append([]bwrap.Mount(nil), pl.mounts...), pl.late...),
		Chdir:      p.Workdir,
		ClearEnv:   info.Features.ClearEnv,
		Env:        env,
		SeccompFD:  fdSeccomp,
		InfoFD:     fdInfo,
		SizeOption: info.Features.Size,
	}
	args, err := bwrap.Args(spec)
	if err != nil {
		return nil, &SetupError{What: "cannot build bwrap arguments", Why: err.Error(), Fix: "remove the NUL byte"}
	}
	if err := bwrap.CheckArgCount(argv, args); err != nil {
		return nil, setupErr("command line too long for bwrap", err.Error(),
			"pass a long list through a file or stdin (xargs inside the sandbox), or bind a common parent instead of many --read paths")
	}
	report := Report{
		Tier: 1, Mechanism: "bwrap", Platform: platform(),
		Bwrap:      &BwrapReport{Path: path, Version: info.Version.String(), Features: info.Features},
		Namespaces: []string{"user", "mount", "pid", "ipc", "uts", "net"},
		HostUID:    uid, HostGID: gid,
		Writable: pl.writable, ReadOnly: pl.readOnly, Protected: pl.protected,
		Watched: pl.prot.watched, ProtectWalk: &pl.prot.walk, Quarantined: pl.quarantined,
		TmpSize:    tmpfsSize(pl.tmpfs, "/tmp"),
		Tmpfs:      pl.tmpfs,
		ReadScan:   pl.scan.report(len(p.Read)),
		WriteScan:  pl.wscan.report(len(pl.writable)),
		BindsByFD:  info.Features.BindFD,
		RunID:      runID,
		Network:    nw.mode,
		AllowHosts: p.AllowHosts,
		Notes:      pl.notes,
		Seccomp:    &SeccompReport{Digest: prog.Digest(), Arch: arch.String(), Ptrace: p.Ptrace, Readback: -1},
	}
	if info.Features.UnshareCgroupTry {
		report.Namespaces = append(report.Namespaces, "cgroup (if the kernel allows)")
	}
	for _, a := range info.Advisories() {
		report.Bwrap.Advisories = append(report.Bwrap.Advisories, Advisory(a))
	}
	for _, kv := range env {
		k, _, _ := strings.Cut(kv, "=")
		report.EnvNames = append(report.EnvNames, k)
	}
	sort.Strings(report.EnvNames)
	report.Protections = bwrapProtections(info.Features.DisableUserns, info.Features.BindFD, info.Features.UnshareCgroupTry, uid, prog.Digest())
	report.TimeoutSec = time.Duration(p.Timeout).Seconds()
	report.Limits = append(timeoutLimit(p), limitReport(lim)...)
	report.EnvironmentDigest = environmentDigest(&report)

	if opts.DryRun != nil {
		fmt.Fprintf(opts.DryRun, "argv: %s\n", strings.Join(quoteAll(argv), " "))
		fmt.Fprintf(opts.DryRun, "args stream (fd %d):\n", fdArgs)
		for _, a := range bwrap.Redact(args) {
			fmt.Fprintf(opts.DryRun, "  %s\n", quote(a))
		}
		fmt.Fprintf(opts.DryRun, "descriptors:\n")
		for _, m := range pl.mounts {
			if m.FD >= 0 {
				fmt.Fprintf(opts.DryRun, "  %d = %s\n", m.FD, m.Src)
			}
		}
		return &Result{Report: report}, nil
	}
	if notRunnable != nil {
		report.Exit = &Exit{Code: notRunnable.Code, Class: map[int]string{126: "not_executable", 127: "not_found"}[notRunnable.Code]}
		return &Result{ExitCode: notRunnable.Code, Report: report}, notRunnable
	}
	log.Debug("starting bwrap", "bwrap_argv", argv, "mounts", len(pl.mounts))
	auditEvent(opts.Audit, runID, "run_start", map[string]any{"tier": 1, "mechanism": "bwrap", "command": cmd[0],
		"network": nw.mode, "allow_hosts": p.AllowHosts})
	res, err = launch(ctx, &launchSpec{cmd: cmd, argv: argv, args: args, seccomp: prog.Bytes(), pl: pl, fast: fast, started: nw.release,
		uid: uid, gid: gid, root: root, host: host, report: report, opts: opts, lim: lim, cg: cg})
	end := map[string]any{}
	if res != nil {
		end["exit"] = res.ExitCode
		if nw.px != nil {
			// Stopped first, so every connection has ended and counted
			// its bytes (close is idempotent; the deferred one is a no-op).
			nw.close()
			c := nw.px.Counts()
			res.Report.Egress = &EgressCounts{Allowed: c.Allowed, Refused: c.Refused, BytesOut: c.BytesOut, BytesIn: c.BytesIn}
			end["egress"] = res.Report.Egress
		}
	}
	if err != nil {
		end["error"] = err.Error()
	}
	auditEvent(opts.Audit, runID, "run_end", end)
	return res, err
}

// launch starts bwrap from a goroutine that holds its OS thread locked for
// bwrap's whole life: the kernel's parent-death signal follows the thread,
// not the process, so a thread that ended early would kill the sandbox and
// a goroutine that moved would leave it without one.
// launchSpec is everything launch needs; the plan's and the cgroup's
// descriptors stay owned by their values.
type launchSpec struct {
	cmd, argv, args []string
	// started, when set, runs once the command has started: every mount
	// is in place.
	started  func()
	seccomp  []byte
	pl       *plan
	uid, gid int
	root     bool
	host     bwrap.Host
	report   Report
	opts     Options
	lim      limits.Plan
	cg       *limits.Cgroup // nil: no cgroup
	fast     bool           // no init: bwrap's PID 1 and the trampoline
}

func launch(ctx context.Context, ls *launchSpec) (*Result, error) {
	cmd, argv, args, seccomp, pl := ls.cmd, ls.argv, ls.args, ls.seccomp, ls.pl
	uid, gid, root, host, report, opts := ls.uid, ls.gid, ls.root, ls.host, ls.report, ls.opts
	var closers []io.Closer
	closeAll := func() {
		for _, c := range closers {
			c.Close()
		}
		closers = nil
	}
	defer closeAll()
	pipe := func() (*os.File, *os.File, error) {
		r, w, err := os.Pipe()
		if err == nil {
			closers = append(closers, r, w)
		}
		return r, w, err
	}
	stream, err := bwrap.Encode(args)
	if err != nil {
		return nil, setupErr("cannot encode bwrap arguments", err.Error(), "remove the NUL byte")
	}
	argsR, argsW, err := pipe()
	if err != nil {
		return nil, setupErr("cannot create a pipe", err.Error(), "raise the descriptor limit")
	}
	statusR, statusW, err := pipe()
	if err != nil {
		return nil, setupErr("cannot create a pipe", err.Error(), "raise the descriptor limit")
	}
	infoR, infoW, err := pipe()
	if err != nil {
		return nil, setupErr("cannot create a pipe", err.Error(), "raise the descriptor limit")
	}
	capR, capW, err := pipe()
	if err != nil {
		return nil, setupErr("cannot create a pipe", err.Error(), "raise the descriptor limit")
	}
	devnull, err := os.OpenFile(os.DevNull, os.O_RDWR, 0)
	if err != nil {
		return nil, setupErr("cannot open /dev/null", err.Error(), "check /dev")
	}
	closers = append(closers, devnull)
	self := devnull // the fast path's trampoline closes the slot
	if !ls.fast {
		self, err = os.OpenFile(selfPath(opts), unix.O_PATH|unix.O_CLOEXEC, 0)
		if err != nil {
			return nil, setupErr("cannot open sandbox-run's own binary", err.Error(), "run sandbox-run from a readable file")
		}
		closers = append(closers, self)
	}
	// A descriptor sandbox-run inherited without close-on-exec would pass
	// through bwrap to the command (Go closes only its own at exec):
	// mark every one close-on-exec; ForkExec below places those the child
	// needs explicitly.
	if err := unix.CloseRange(3, ^uint(0), unix.CLOSE_RANGE_CLOEXEC); err != nil {
		// Before Linux 5.11: one by one.
		ents, err := os.ReadDir("/proc/self/fd")
		if err != nil {
			return nil, setupErr("cannot list inherited descriptors", err.Error(), "mount /proc")
		}
		for _, e := range ents {
			if fd, err := strconv.Atoi(e.Name()); err == nil && fd > 2 {
				unix.CloseOnExec(fd)
			}
		}
	}
	stdin, stdout, stderr := orNull(opts.Stdin, devnull), orNull(opts.Stdout, devnull), orNull(opts.Stderr, devnull)

	// The filter is a few kilobytes, far below a pipe's buffer, so it is
	// written whole before bwrap starts and bwrap reads it to EOF.
	secR, secW, err := pipe()
	if err != nil {
		return nil, setupErr("cannot create a pipe", err.Error(), "raise the descriptor limit")
	}
	if _, err := secW.Write(seccomp); err != nil {
		return nil, setupErr("cannot pass the seccomp filter", err.Error(), "report this as a bug in sandbox-run")
	}
	secW.Close()

	// Descriptor i of the child is files[i]: 0-2, then the control fds in
	// the order of the fd* constants, then the bind plan's.
	files := []*os.File{stdin, stdout, capW, argsR, statusW, stderr, infoW, self, secR}
	files = append(files, pl.files...)
	fds := make([]uintptr, len(files))
	for i, f := range files {
		fds[i] = f.Fd()
	}
	attr := &syscall.ProcAttr{
		Env:   []string{}, // bwrap itself gets nothing of ours
		Files: fds,
		Sys:   &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL, Setpgid: true},
	}
	if root {
		attr.Sys.Credential = &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid), Groups: []uint32{}}
	}
	if ls.cg != nil {
		// Born inside the run's cgroup (clone3 CLONE_INTO_CGROUP): no
		// moment when bwrap or anything below it is outside the limits.
		attr.Sys.UseCgroupFD, attr.Sys.CgroupFD = true, ls.cg.FD()
	}

	type exit struct {
		ws  syscall.WaitStatus
		err error
	}
	started := make(chan error, 1)
	exited := make(chan exit, 1)
	var pid int
	go func() {
		runtime.LockOSThread()
		// Never unlocked: the thread ends with this goroutine, after bwrap.
		// syscall.ForkExec rather than os/exec: os.StartProcess first forks
		// a throwaway child to probe pidfd support, a cost on every launch.
		var err error
		pid, err = syscall.ForkExec(argv[0], argv, attr)
		started <- err
		if err != nil {
			return
		}
		var ws syscall.WaitStatus
		for {
			_, err = syscall.Wait4(pid, &ws, 0, nil)
			if err != syscall.EINTR {
				break
			}
		}
		exited <- exit{ws, err}
	}()
	if err := <-started; err != nil {
		return nil, setupErr("cannot start bwrap", err.Error(), "check that "+argv[0]+" is executable")
	}
	// The child holds its ends now; ours would keep EOF from ever coming.
	for _, f := range []*os.File{argsR, statusW, infoW, capW, secR} {
		f.Close()
	}
	pl.close()

	go func() {
		argsW.Write(stream)
		argsW.Close()
	}()

	var rl relay
	rl.out = stderr
	relayDone := make(chan struct{})
	go func() { rl.run(capR); close(relayDone) }()

	statusCh := make(chan *initproc.Status, 1)
	go func() {
		b, _ := io.ReadAll(io.LimitReader(statusR, 1<<20))
		b = bytes.TrimSpace(b)
		if len(b) == 0 {
			statusCh <- nil
			return
		}
		if ls.fast {
			statusCh <- decodeTrampoline(b)
			return
		}
		s, err := initproc.DecodeStatus(b)
		if err != nil {
			statusCh <- &initproc.Status{Error: err.Error(), Exit: 125}
			return
		}
		statusCh <- &s
	}()
	pidCh := make(chan int, 1)
	go func() {
		var v struct {
			ChildPID int `json:"child-pid"`
		}
		json.NewDecoder(infoR).Decode(&v)
		pidCh <- v.ChildPID
		io.Copy(io.Discard, infoR)
	}()

	var (
		initPID  int
		seenUID  = -1
		over     <-chan limits.Exceeded
		killedBy = limits.None
		exceeded limits.Exceeded
		status   *initproc.Status
		haveStat bool
		ex       exit
		pending  []os.Signal
		// killedBwrap: sandbox-run itself sent bwrap SIGKILL (ctx done).
		killedBwrap bool
		// watchErr: a sampler the plan relies on could not start; the
		// sandbox was ended.
		watchErr error
	)
	// Signals wait until init reports the command started: init, as PID
	// 1 of its namespace, ignores any signal it has no handler for yet,
	// and it installs its handlers before it starts the command.
	cmdStarted := false
	send := func(s os.Signal) {
		switch {
		case cmdStarted && initPID > 0 && ls.fast:
			// The command leads its own session: its group first, so a
			// shell's children hear it too.
			if c := commandPID(initPID); c > 0 {
				unix.Kill(-c, s.(syscall.Signal))
				unix.Kill(c, s.(syscall.Signal))
			}
		case cmdStarted && initPID > 0:
			unix.Kill(initPID, s.(syscall.Signal))
		default:
			pending = append(pending, s)
		}
	}
	var fastNS map[string]string
	onPID := func(pid int) {
		initPID = pid
		if ls.fast {
			// Read at once: bwrap's PID 1 is gone when the run ends.
			fastNS = namespacesOf(pid)
		}
		seenUID = hostUIDOf(pid)
		var err error
		if over, err = watchLimits(ctx, ls, pid); err != nil {
			// Fail closed: the plan says a limit is sampled, and
			// nothing would sample it.
			watchErr = err
			unix.Kill(pid, unix.SIGKILL)
		}
		pidCh = nil
	}
	ctxDone := ctx.Done()
	for done := false; !done; {
		select {
		case pid := <-pidCh:
			onPID(pid)
		case s := <-statusCh:
			status, haveStat = s, true
			statusCh = nil
			if s != nil && s.Started {
				rl.start()
				cmdStarted = true
				if ls.started != nil {
					ls.started()
				}
				if pidCh != nil {
					// bwrap writes the pid before it starts init, so it
					// is there to read.
					onPID(<-pidCh)
				}
				for _, s := range pending {
					send(s)
				}
				pending = nil
			}
		case s := <-opts.Signals:
			send(s)
		case e, ok := <-over:
			over = nil
			if ok && killedBy == limits.None {
				// A limit ends the whole sandbox: PID 1 takes every
				// process with it.
				killedBy, exceeded = e.Kind, e
				unix.Kill(initPID, unix.SIGKILL)
			}
		case <-ctxDone:
			ctxDone = nil
			if initPID > 0 {
				unix.Kill(initPID, unix.SIGKILL)
			}
			unix.Kill(pid, unix.SIGKILL)
			// A limit that ended the sandbox first stays the reason.
			killedBwrap = killedBy == limits.None
		case ex = <-exited:
			done = true
		}
	}
	// bwrap is gone, so every writer of the status and info pipes is too.
	if !haveStat {
		status = <-statusCh
	}
	<-relayDone

	code := 125
	if ex.err == nil {
		code = waitCode(ex.ws)
	}
	// A command that dies of signal N makes bwrap exit normally with
	// 128+N; bwrap itself dying of a signal that sandbox-run did not send
	// and no limit explains means someone killed it. --die-with-parent
	// has ended the sandbox with it; the command's status is lost.
	bwrapKilled := ex.err == nil && ex.ws.Signaled() && !killedBwrap && classifyLimit(ls, code, killedBy) == limits.None
	if full := fullDirs(report.Writable); len(full) > 0 {
		report.FullFilesystems = full
		notes := slices.Clip(report.Notes)
		for i, dir := range full {
			what := "the file system of writable directory " + dir
			if i == 0 && dir == report.Writable[0] {
				what = "the workdir's file system (" + dir + ")"
			}
			notes = append(notes, what+" is full: writes there fail with ENOSPC (No space left on device)")
		}
		report.Notes = notes
	}
	if watchErr != nil {
		return nil, setupErr("cannot watch the sandbox's sampled limits", watchErr.Error(),
			"check that /proc is mounted and readable, or drop --memory, --pids and --cpu-time")
	}
	switch {
	case bwrapKilled:
		if status != nil && status.Readback != nil {
			report.Readback = status.Readback
			report.Seccomp.Readback = status.Readback.Seccomp
			verify(report.Protections, status.Readback)
		}
		report.Exit = &Exit{Code: 125, Class: "mechanism_killed"}
		return &Result{ExitCode: 125, Report: report}, &KilledError{Mechanism: "bwrap", Signal: int(ex.ws.Signal())}
	case status != nil && status.Started:
		if ls.fast && status.Readback != nil {
			status.Readback.Namespaces = fastNS
		}
		if status.Readback != nil {
			report.Readback = status.Readback
			report.Seccomp.Readback = status.Readback.Seccomp
			verify(report.Protections, status.Readback)
		}
		verifyHostUID(report.Protections, seenUID)
		if killedBwrap {
			// Ended because ctx was done (Run's timer or the caller):
			// ctx's error says which, and Run classifies a timer's end.
			report.Exit = classify(code, "")
			return &Result{ExitCode: code, Report: report}, ctxErr(ctx)
		}
		if k := classifyLimit(ls, code, killedBy); k != limits.None {
			if killedBy == limits.None {
				exceeded = limits.Exceeded{Kind: k}
				// The kernel ended it before Watch said so (the OOM
				// killer takes PID 1 with the group): the cgroup still
				// knows the usage and the limit.
				if ls.cg != nil {
					if x, ok := ls.cg.Exceeded(); ok && x.Kind == k {
						exceeded = x
					}
				}
			}
			report.Exit = classify(code, limitClass(k))
			return &Result{ExitCode: code, Report: report}, &LimitError{Exceeded: exceeded}
		}
		report.Exit = classify(code, "")
		return &Result{ExitCode: code, Report: report}, nil
	case status != nil && (status.Exit == 126 || status.Exit == 127):
		report.Readback = status.Readback
		verify(report.Protections, status.Readback)
		report.Exit = &Exit{Code: status.Exit, Class: map[int]string{126: "not_executable", 127: "not_found"}[status.Exit]}
		return &Result{ExitCode: status.Exit, Report: report}, &ExecError{Code: status.Exit, Command: cmd[0], Reason: reasonOf(status.Error)}
	case status != nil && ls.fast && status.Error != "":
		// The trampoline's only refusal: RLIMIT_NPROC not held as asked
		// (setupLimits has kept the value under the hard limit).
		return nil, setupErr("the sandbox's process ceiling could not be set", status.Error,
			"make /bin/sh a shell whose ulimit sets the process limit (dash, bash, busybox ash), or report this with your /bin/sh")
	case status != nil:
		return nil, setupErr("sandbox init failed", status.Error, "report this as a bug in sandbox-run")
	case ctx.Err() != nil:
		return nil, fmt.Errorf("sandbox: cancelled before the command started: %w", ctx.Err())
	}
	if k := classifyLimit(ls, code, killedBy); k != limits.None {
		// bwrap and init count against the limits too: a limit that
		// ended the sandbox before the command started is the cause,
		// not bwrap (make test-vm found --cpu-time spent in set-up).
		if exceeded.Kind != k {
			exceeded = limits.Exceeded{Kind: k}
		}
		return nil, setupErr("the sandbox was ended before the command started",
			strings.TrimSuffix((&LimitError{Exceeded: exceeded}).Error(), "; the whole sandbox was ended")+
				" while bwrap and sandbox-run's init were setting it up",
			"raise the limit: the sandbox's own set-up counts against it")
	}
	return nil, bwrap.Diagnose(rl.held(), code, host)
}

func reasonOf(s string) string {
	if i := strings.LastIndex(s, ": "); i >= 0 {
		return s[i+2:]
	}
	return s
}

func waitCode(ws syscall.WaitStatus) int {
	if ws.Signaled() {
		return 128 + int(ws.Signal())
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
func watchLimits(ctx context.Context, ls *launchSpec, initPID int) (<-chan limits.Exceeded, error) {
	var chans []<-chan limits.Exceeded
	if ls.cg != nil {
		chans = append(chans, ls.cg.Watch(ctx, 10*time.Millisecond))
	}
	if ls.lim.Sample != (limits.Limits{}) {
		ch, err := limits.Sample(ctx, initPID, ls.lim.Sample, limits.DefaultInterval)
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
func classifyLimit(ls *launchSpec, code int, killedBy limits.Kind) limits.Kind {
	ev := limits.Evidence{Killed: killedBy, CPULimit: ls.lim.Limits.CPUTime}
	if code > 128 {
		ev.Signal = code - 128
	}
	if ls.cg != nil {
		if e, err := ls.cg.Events(); err == nil {
			ev.OOMKills = e.OOMKills + e.OOMGroupKills
			if killedBy == limits.None && e.Kind() != limits.None && code > 128 {
				ev.Killed = e.Kind()
			}
		}
		if t, err := ls.cg.CPUTime(); err == nil {
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
// The process ceiling is policy.DefaultPids when the policy names none.
//
// Pids without a cgroup's pids controller is RLIMIT_NPROC, set inside the
// sandbox's own user namespace: since Linux 5.14 the kernel counts it per
// user namespace and uid, so it holds the sandbox's tasks and nothing of
// the host's (the same uid's other processes, other sandboxes). On older
// kernels it is sampled. The command is never host root, whom the kernel
// would exempt.
func setupLimits(p policy.Policy, runID string) (limits.Plan, *limits.Cgroup, error) {
	l := limits.Limits{Memory: p.Memory, Pids: pidsCeiling(p), NoFile: p.NoFile, FSize: p.FSize, CPUTime: time.Duration(p.CPUTime)}
	env := limits.Env{OverheadTasks: overheadTasks, UserNS: limits.NProcPerUserNS()}
	// Every process of the sandbox inherits sandbox-run's own hard
	// RLIMIT_NPROC, and counts against it inside its user namespace: a
	// ceiling above it would be reported at a value that is not the one
	// held. The default comes down to it; one asked for is refused.
	if hard, err := limits.Hard(limits.NProc); err == nil && hard != limits.Infinity && uint64(l.Pids+overheadTasks) > hard {
		if p.Pids > 0 || hard <= 2*overheadTasks {
			return limits.Plan{}, nil, setupErr(fmt.Sprintf("--pids %d cannot be held", l.Pids),
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
	plan, err := limits.NewPlan(l, env)
	if err != nil {
		return limits.Plan{}, nil, &SetupError{What: "limits", Why: err.Error(), Fix: "pass positive limits (--memory of at least 1M, --nofile of at least 4)"}
	}
	if base == "" || plan.Cgroup == (limits.Limits{}) {
		return plan, nil, nil
	}
	cg, err := limits.Create(base, "sandbox-run-"+runID, plan.Cgroup)
	if err != nil {
		return limits.Plan{}, nil, &SetupError{What: "cannot create the run's cgroup in " + base, Why: err.Error(), Fix: "check the delegation of " + base + " or drop --cgroup-base"}
	}
	return plan, cg, nil
}
