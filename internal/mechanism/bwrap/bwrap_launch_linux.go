package bwrap

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"

	bw "github.com/sandbox-run/sandbox-run/bwrap"
	"github.com/sandbox-run/sandbox-run/internal/exitcode"
	"github.com/sandbox-run/sandbox-run/internal/fault"
	"github.com/sandbox-run/sandbox-run/internal/initproc"
	"github.com/sandbox-run/sandbox-run/internal/limits"
	"github.com/sandbox-run/sandbox-run/internal/mechanism"
	"github.com/sandbox-run/sandbox-run/internal/tun"
	"github.com/sandbox-run/sandbox-run/report"
)

// bwExit is how bwrap ended, as wait4 told.
type bwExit struct {
	ws  syscall.WaitStatus
	err error
}

// bwProc is a started bwrap: its pid, the ends of the pipes sandbox-run
// reads, and its end. The descriptors are on the run's cleanup stack.
type bwProc struct {
	pid     int
	statusR *os.File // init's or the trampoline's status line
	infoR   *os.File // bwrap's --info-fd (the sandbox's PID 1)
	capR    *os.File // bwrap's own stderr, held until the command starts
	stderr  *os.File // where the held stderr goes
	gate    *os.File // the fast path's gate: "go" opens it (readTrampoline)
	exited  chan bwExit
}

// pipe makes a pipe whose ends are on the run's cleanup stack.
func (r *bwRun) pipe() (*os.File, *os.File, error) {
	rd, wr, err := os.Pipe()
	if err != nil {
		return nil, nil, fault.New("cannot create a pipe", err.Error(), "raise the descriptor limit")
	}
	r.undo.Push(func() { rd.Close(); wr.Close() })
	return rd, wr, nil
}

// start starts bwrap with its descriptors in place: descriptor i of the
// child is files[i] (0-2, then the control fds in the order of the fd*
// constants, then the bind plan's), and writes bwrap's argument stream.
func (r *bwRun) start() (*bwProc, error) {
	var p [5][2]*os.File // args, status, info, stderr capture, seccomp
	var err error
	for i := range p {
		if p[i][0], p[i][1], err = r.pipe(); err != nil {
			return nil, err
		}
	}
	argsR, argsW, statusR, statusW, infoR, infoW, capR, capW, secR, secW := p[0][0], p[0][1], p[1][0], p[1][1], p[2][0], p[2][1], p[3][0], p[3][1], p[4][0], p[4][1]
	devnull, self, err := r.selfAndNull()
	if err != nil {
		return nil, err
	}
	// The gate the command waits at until the watch opens it (onReady):
	// the trampoline's in the init slot, fd 7; init's after the binds.
	gateR, gateW, err := r.pipe()
	if err != nil {
		return nil, err
	}
	if r.fast {
		self = gateR
	}
	if err := cloexecInherited(); err != nil {
		return nil, err
	}
	// The filter is a few kilobytes, far below a pipe's buffer, so it is
	// written whole before bwrap starts and bwrap reads it to EOF.
	if _, err := secW.Write(r.prog.Bytes()); err != nil {
		return nil, fault.New("cannot pass the seccomp filter", err.Error(), "report this as a bug in sandbox-run")
	}
	secW.Close()
	o := r.opts
	stdin, stdout, stderr := mechanism.OrNull(o.Stdin, devnull), mechanism.OrNull(o.Stdout, devnull), mechanism.OrNull(o.Stderr, devnull)
	files := append([]*os.File{stdin, stdout, capW, argsR, statusW, stderr, infoW, self, secR}, r.pl.Files...)
	if !r.fast {
		files = append(files, gateR) // init's gate (command sets GateFD)
	}
	if r.brokerChild != nil {
		files = append(files, r.brokerChild) // the broker's socket (command sets BrokerFD)
	}
	bp := &bwProc{statusR: statusR, infoR: infoR, capR: capR, stderr: stderr, gate: gateW, exited: make(chan bwExit, 1)}
	stream, err := r.forkBwrap(files, bp)
	if err != nil {
		var se *fault.Error
		if errors.As(err, &se) {
			return nil, err // --map-owner's own, already one line
		}
		return nil, fault.New("cannot start bwrap", err.Error(), "check that "+r.argv[0]+" is executable")
	}
	// The child holds its ends now; ours would keep EOF from ever coming.
	for _, f := range []*os.File{argsR, statusW, infoW, capW, secR} {
		f.Close()
	}
	gateR.Close()
	if r.brokerChild != nil {
		r.brokerChild.Close()
		r.nw.ServeBroker(r.broker, r.log)
	}
	r.pl.Close()
	go func() {
		argsW.Write(stream)
		argsW.Close()
	}()
	return bp, nil
}

// forkBwrap starts bwrap (startTransparent's way when the run plans
// transparent egress) and returns the argument stream for the bwrap that
// runs.
func (r *bwRun) forkBwrap(files []*os.File, bp *bwProc) ([]byte, error) {
	stream, err := bw.Encode(r.args)
	var streamNet []byte
	if err == nil && r.argsNet != nil {
		streamNet, err = bw.Encode(r.argsNet)
	}
	if err != nil {
		return nil, fault.New("cannot encode bwrap arguments", err.Error(), "remove the NUL byte")
	}
	if r.argsNet == nil {
		bp.pid, err = r.fork(launch{argv: r.argv}, files, bp.exited)
		return stream, err
	}
	if bp.pid, r.netMade, err = r.startTransparent(files, bp); r.netMade {
		stream = streamNet
	}
	return stream, err
}

// selfAndNull opens /dev/null and, on the init path, the binary bwrap
// executes as init (openInit); on the fast path that slot is the
// trampoline's gate, so self is /dev/null until start replaces it.
func (r *bwRun) selfAndNull() (devnull, self *os.File, err error) {
	devnull, err = os.OpenFile(os.DevNull, os.O_RDWR, 0)
	if err != nil {
		return nil, nil, fault.New("cannot open /dev/null", err.Error(), "check /dev")
	}
	r.undo.Push(func() { devnull.Close() })
	if r.fast {
		return devnull, devnull, nil
	}
	if self, err = r.openInit(); err != nil {
		return nil, nil, err
	}
	r.undo.Push(func() { self.Close() })
	return devnull, self, nil
}

// cloexecInherited marks every descriptor above 2 close-on-exec: one that
// sandbox-run inherited without it would pass through bwrap to the
// command (Go closes only its own at exec); fork places those the child
// needs explicitly.
func cloexecInherited() error {
	if err := unix.CloseRange(3, ^uint(0), unix.CLOSE_RANGE_CLOEXEC); err == nil {
		return nil
	}
	// Before Linux 5.11: one by one.
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		return fault.New("cannot list inherited descriptors", err.Error(), "mount /proc")
	}
	for _, e := range ents {
		if fd, err := strconv.Atoi(e.Name()); err == nil && fd > 2 {
			unix.CloseOnExec(fd)
		}
	}
	return nil
}

// launch is what fork starts: bwrap's command line, or the network
// namespace helper's (which becomes bwrap) with its namespaces.
type launch struct {
	argv   []string
	helper bool // start argv with tun.HelperAttr; it takes the ids itself
	pidfd  *int // set to the child's pidfd when not nil
}

// fork starts bwrap from a goroutine that holds its OS thread locked for
// bwrap's whole life: the kernel's parent-death signal follows the thread,
// not the process, so a thread that ended early would kill the sandbox and
// a goroutine that moved would leave it without one. bwrap is started
// into the group of the run's guard (started on the first fork), which
// kills what bwrap forked before its own death signals if sandbox-run
// dies (mechanism.GroupGuard). bwrap's end is sent on exited.
func (r *bwRun) fork(l launch, files []*os.File, exited chan<- bwExit) (int, error) {
	fds := make([]uintptr, len(files))
	for i, f := range files {
		fds[i] = f.Fd()
	}
	if r.guard == nil {
		g, err := mechanism.StartGroupGuard()
		if err != nil {
			return -1, err
		}
		r.guard = g
		r.undo.Push(g.End)
	}
	attr := &syscall.ProcAttr{
		Env:   []string{}, // bwrap itself gets nothing of ours
		Files: fds,
		Sys:   &syscall.SysProcAttr{},
	}
	switch {
	case l.helper:
		attr.Sys = tun.HelperAttr(r.uid, r.gid, r.root)
	case r.root:
		attr.Sys.Credential = &syscall.Credential{Uid: uint32(r.uid), Gid: uint32(r.gid), Groups: []uint32{}}
	}
	// In the guard's process group: what bwrap forks before its own
	// death signals are armed dies with sandbox-run too (GroupGuard).
	attr.Sys.Pdeathsig = syscall.SIGKILL
	r.guard.Join(attr.Sys)
	attr.Sys.PidFD = l.pidfd
	if r.cg != nil {
		// Born inside the run's cgroup (clone3 CLONE_INTO_CGROUP): no
		// moment when bwrap or anything below it is outside the limits.
		attr.Sys.UseCgroupFD, attr.Sys.CgroupFD = true, r.cg.FD()
	}
	type started struct {
		pid int
		err error
	}
	ch := make(chan started, 1)
	go func() {
		runtime.LockOSThread()
		// Never unlocked: the thread ends with this goroutine, after bwrap
		// (a file system context of its own, from --map-owner's unshare).
		var lent []int
		back := func() error { return nil }
		if r.lend != nil {
			var err error
			if lent, back, err = r.lend.attach(fds); err != nil {
				ch <- started{-1, err}
				return
			}
		}
		// syscall.ForkExec rather than os/exec: os.StartProcess first forks
		// a throwaway child to probe pidfd support, a cost on every launch.
		pid, err := syscall.ForkExec(l.argv[0], l.argv, attr)
		for _, t := range lent {
			unix.Close(t) // bwrap holds its copies
		}
		// bwrap has the lent namespace; the thread goes back to the
		// host's (a main thread wedged by Go would otherwise keep it).
		if berr := back(); berr != nil && err == nil {
			r.log.Warn("the launching thread stays in --map-owner's mount namespace", "error", berr)
		}
		ch <- started{pid, err}
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
		exited <- bwExit{ws, err}
	}()
	s := <-ch
	return s.pid, s.err
}

// bwWatch follows a started bwrap through the one supervision loop
// (mechanism.Supervise): signals wait for the command's start, the
// sampled limits hold from the moment the sandbox's PID 1 is known, and
// what the sandbox reports is collected until bwrap exits.
type bwWatch struct {
	r         *bwRun
	ctx       context.Context
	bp        *bwProc
	rl        mechanism.StderrRelay
	relayDone chan struct{}
	statusCh  chan *initproc.Status
	pidCh     chan bwInfo
	readyCh   chan struct{} // the trampoline or init waits at its gate
	// infoDone is closed once onInfo has run: initPID, fastNS and seenUID
	// are set, and may be read by whoever has seen it closed.
	infoDone chan struct{}

	initPID int // the sandbox's PID 1 as the host sees it; 0 unknown
	seenUID int // its host uid, -1 unread
	fastNS  map[string]string
	fastRB  *initproc.Readback // readTrampoline's, at the gate
	// oom is the command's oom_score_adj read back from the host once it
	// was set (at the gate, or when init reported the start); nil unread.
	oom      *int
	gateErr  error // the gate stayed shut: why
	killedBy limits.Kind
	exceeded limits.Exceeded
	status   *initproc.Status
	ex       bwExit
	// killedBwrap: sandbox-run itself sent bwrap SIGKILL (ctx done).
	killedBwrap bool
	// watchErr: a sampler the plan relies on could not start; the
	// sandbox was ended.
	watchErr error
	// inotifyLost: the inotify ceiling could not be set or read back;
	// the report names it as not held. Written by the goroutine that
	// sets it, read after inotifyDone is closed (nil: never started).
	inotifyLost error
	inotifyDone chan struct{}
	// stop ends setUp's wait for a gate; setUpDone and statusDone are
	// closed once setUp and the status's reader have returned.
	stop, setUpDone, statusDone chan struct{}
}

func (r *bwRun) newWatch(ctx context.Context, bp *bwProc) *bwWatch {
	w := &bwWatch{r: r, ctx: ctx, bp: bp, seenUID: -1, relayDone: make(chan struct{}), infoDone: make(chan struct{}),
		statusCh: make(chan *initproc.Status, 1), pidCh: make(chan bwInfo, 1), readyCh: make(chan struct{}, 1)}
	w.rl.Out = bp.stderr
	go func() { w.rl.Run(bp.capR); close(w.relayDone) }()
	go w.readStatus()
	go func() {
		w.pidCh <- readInfo(bp.infoR)
		io.Copy(io.Discard, bp.infoR)
	}()
	return w
}

// readStatus reads the status of init (one JSON line) or of the
// trampoline; the first line of either, "ready" at the gate, is passed
// on at once. It sends nil when there is none (the sandbox never got
// that far).
func (w *bwWatch) readStatus() {
	br := bufio.NewReader(io.LimitReader(w.bp.statusR, 1<<20))
	head, _ := br.ReadBytes('\n')
	if string(bytes.TrimSpace(head)) == "ready" {
		w.readyCh <- struct{}{}
		if !w.r.fast {
			head = nil
		}
	}
	rest, _ := io.ReadAll(br)
	b := bytes.TrimSpace(append(head, rest...))
	switch {
	case len(b) == 0:
		w.statusCh <- nil
	case w.r.fast:
		s := decodeTrampoline(b)
		if !s.Started && s.Error == "" {
			s = nil // ended at the gate: by sandbox-run, a limit or ctx
		}
		w.statusCh <- s
	default:
		s, err := initproc.DecodeStatus(b)
		if err != nil {
			s = initproc.Status{Error: err.Error(), Exit: exitcode.Setup}
		}
		w.statusCh <- &s
	}
}

// process is bwrap as the one supervision loop holds it until it exits.
// Beside the loop, setUp follows bwrap's reports before the command
// starts (the sandbox's PID 1, then the gate), and the status line says
// whether the command started. Signals wait for that line: init, as PID 1
// of its namespace, ignores any signal it has no handler for yet, and it
// installs its handlers before it starts the command.
func (w *bwWatch) process() mechanism.Process {
	over := make(chan limits.Exceeded, 1)
	started := make(chan bool, 1)
	w.stop, w.setUpDone, w.statusDone = make(chan struct{}), make(chan struct{}), make(chan struct{})
	go func() { defer close(w.setUpDone); w.setUp(over, w.stop) }()
	go func() {
		defer close(w.statusDone)
		w.status = <-w.statusCh
		started <- w.status != nil && w.status.Started
	}()
	return mechanism.Process{
		Wait:    func() error { w.ex = <-w.bp.exited; return w.ex.err },
		Signal:  w.send,
		Kill:    w.kill,
		Started: started,
		OnStart: w.onStart,
		Over:    over,
	}
}

// after collects what the sandbox reported once the loop has returned
// end: bwrap is gone, so every writer of the status and info pipes is too.
func (w *bwWatch) after(end mechanism.Ending) {
	close(w.stop)
	<-w.setUpDone
	w.awaitInotify()
	<-w.statusDone
	if end.Exceeded != nil {
		w.killedBy, w.exceeded = end.Exceeded.Kind, *end.Exceeded
	}
	w.killedBwrap = end.Cancelled
	if w.r.fast && w.status != nil {
		w.status.Readback = w.fastRB
	}
	<-w.relayDone
}

// setUp learns the sandbox's PID 1 from bwrap's info and starts holding
// the limits, then opens the gate when the command waits at it; stop
// ends the wait for a gate once bwrap has exited.
func (w *bwWatch) setUp(over chan<- limits.Exceeded, stop <-chan struct{}) {
	ch := w.onInfo(<-w.pidCh)
	close(w.infoDone)
	if w.initPID > 0 {
		w.startInotify()
	}
	if ch != nil {
		// After infoDone: the loop ends the sandbox's PID 1, not bwrap.
		go func() {
			if x, ok := <-ch; ok {
				over <- x
			}
		}()
	}
	select {
	case <-w.readyCh:
		w.onReady()
	case <-stop:
	}
}

// onInfo learns the sandbox's PID 1 and starts watching the limits,
// whose first crossing it returns. A PID 1 that bwrap never reported is
// 0, which no signal is ever sent to (mechanism.Kill).
func (w *bwWatch) onInfo(info bwInfo) <-chan limits.Exceeded {
	pid := info.pid
	w.initPID = pid
	if w.r.fast {
		// Read at once: bwrap's PID 1 is gone when the run ends.
		w.fastNS = namespacesOf(pid, info.ns)
	}
	w.seenUID = hostUIDOf(pid)
	ch, err := watchLimits(w.ctx, w.r.lim, w.r.cg, pid)
	if err != nil {
		// Fail closed: the plan says a limit is sampled, and nothing
		// would sample it.
		w.watchErr = err
		endSandbox(pid, w.bp.pid)
		return nil
	}
	return ch
}

// onReady sets the inotify ceiling while the command's process waits at
// its gate and opens the gate; on the fast path it first reads the
// kernel's view of the trampoline there, and keeps the gate shut and
// ends the sandbox when that is not what the plan says.
func (w *bwWatch) onReady() {
	defer w.bp.gate.Close()
	if w.initPID <= 0 {
		w.gateErr = errors.New("bwrap did not report the sandbox's PID 1")
		mechanism.Kill(w.bp.pid, unix.SIGKILL)
		return
	}
	if !w.r.fast {
		// The ceiling holds from the command's first instruction.
		w.awaitInotify()
		w.bp.gate.WriteString("go\n")
		return
	}
	tpid := commandPID(w.initPID)
	if tpid <= 0 {
		w.gateErr = errors.New("the script is not the child of the sandbox's PID 1")
		endSandbox(w.initPID, w.bp.pid)
		return
	}
	rb, err := readTrampoline(tpid, w.r.nproc)
	if err == nil {
		err = w.readOOM(tpid)
	}
	if err != nil {
		w.gateErr = err
		endSandbox(w.initPID, w.bp.pid)
		return
	}
	// The command waits behind the gate until the ceiling holds.
	w.awaitInotify()
	w.fastRB = rb
	w.bp.gate.WriteString("go\n")
}

// onStart is what follows the status that says the command started:
// bwrap's held stderr is let through, the bound sockets' directory goes,
// and, with init, the command's oom_score_adj is read back.
func (w *bwWatch) onStart() (<-chan limits.Exceeded, error) {
	// bwrap writes the pid before it starts init, so onInfo has it.
	<-w.infoDone
	w.rl.Start()
	w.r.nw.Release()
	if !w.r.fast && w.initPID > 0 {
		// init raised its own before it started the command, which
		// inherits it: read the command's, or init's once it is gone.
		if w.readOOM(commandPID(w.initPID)) != nil {
			w.readOOM(w.initPID)
		}
	}
	return nil, nil
}

// send relays s to the command, which has started (Supervise holds
// signals until then).
func (w *bwWatch) send(s os.Signal) {
	sig, ok := s.(syscall.Signal)
	if !ok {
		return
	}
	if !w.r.fast {
		mechanism.Kill(w.initPID, sig)
		return
	}
	// The command leads its own session: its group first, so a shell's
	// children hear it too.
	if c := commandPID(w.initPID); c > 0 {
		mechanism.Kill(-c, sig)
		mechanism.Kill(c, sig)
	}
}

// kill is Supervise's end of the sandbox: for a limit its PID 1, which
// takes every process with it; for ctx bwrap too, which dies without
// reporting the command's status (killedBwrap).
//
// It runs on the loop, beside setUp, so it reads initPID only once onInfo
// has set it.
func (w *bwWatch) kill() {
	initPID := 0
	select {
	case <-w.infoDone:
		initPID = w.initPID
	default:
	}
	endSandbox(initPID, w.bp.pid)
	if w.ctx.Err() != nil {
		mechanism.Kill(w.bp.pid, unix.SIGKILL)
	}
}

// endSandbox kills the sandbox's PID 1, or bwrap when PID 1 is not known
// (0) or already gone.
func endSandbox(initPID, bwrapPID int) {
	if initPID <= 0 || !mechanism.Kill(initPID, unix.SIGKILL) {
		mechanism.Kill(bwrapPID, unix.SIGKILL)
	}
}

// startInotify starts setting the inotify ceiling in the sandbox's user
// namespace as soon as bwrap has reported the sandbox's PID 1, beside
// bwrap's own set-up of the sandbox (which takes about as long), rather
// than after it; the command's gate waits for it (awaitInotify). The
// ceiling is a default no flag asked for, so one that cannot be held
// (bwrap cannot join the namespace, as in a container without
// CAP_SYS_PTRACE) does not end the run: it is kept in w.inotifyLost, and
// the report names the ceiling as not held, with why.
func (w *bwWatch) startInotify() {
	done := make(chan struct{})
	w.inotifyDone = done
	go func() {
		defer close(done)
		if err := w.r.setInotify(w.ctx, w.initPID); err != nil {
			w.inotifyLost = err
		}
	}()
}

// awaitInotify waits until startInotify's work is done, if it started.
func (w *bwWatch) awaitInotify() {
	if w.inotifyDone != nil {
		<-w.inotifyDone
	}
}

// readOOM reads pid's oom_score_adj into w.oom, and says when it is not
// limits.OOMScoreAdj.
func (w *bwWatch) readOOM(pid int) error {
	if pid <= 0 {
		return errors.New("oom_score_adj: the command's process is gone")
	}
	v, err := limits.OOMScore(pid)
	if err != nil {
		return err
	}
	w.oom = &v
	if v != limits.OOMScoreAdj {
		return fmt.Errorf("oom_score_adj reads back as %d, not %d", v, limits.OOMScoreAdj)
	}
	return nil
}

// readback puts what init read inside, and the oom_score_adj read from
// the host, into the report.
func (w *bwWatch) readback(rep *report.Report) {
	rep.OOMScoreAdj = w.oom
	if w.r.nw != nil && w.r.nw.Proxy != nil {
		// Attached, or lost when planned or started: say which.
		rep.Transparent = w.r.nw.TransparentReport()
		if !rep.Transparent.Enabled {
			rep.Notes = append(rep.Notes, "transparent egress lost: "+rep.Transparent.Reason)
		}
	}
	if w.inotifyLost != nil {
		inotifyLost(rep, w.inotifyLost)
	}
	if w.status == nil || w.status.Readback == nil {
		return
	}
	rep.Readback = mechanism.ReadbackOf(w.status.Readback)
	rep.Seccomp.Readback = w.status.Readback.Seccomp
	verify(rep.Protections, w.status.Readback)
}

// classify reads how the run ended: the command's status, bwrap killed
// from outside, a limit, or a sandbox that never started (a set-up error
// naming bwrap's own cause).
func (r *bwRun) classify(ctx context.Context, w *bwWatch) (mechanism.Ended, error) {
	code := exitcode.Setup
	if w.ex.err == nil {
		code = mechanism.WaitCode(w.ex.ws)
	}
	rep := r.report
	noteFull(&rep)
	e := mechanism.Ended{Code: code}
	if err := w.failed(); err != nil {
		return e, err
	}
	limit := classifyLimit(r.lim, r.cg, code, w.killedBy)
	// A command that dies of signal N makes bwrap exit normally with
	// 128+N; bwrap itself dying of a signal that sandbox-run did not send
	// and no limit explains means someone killed it. --die-with-parent
	// has ended the sandbox with it; the command's status is lost.
	if w.ex.err == nil && w.ex.ws.Signaled() && !w.killedBwrap && limit == limits.None {
		w.readback(&rep)
		e.Report = rep
		return e, &mechanism.KilledError{Mechanism: "bwrap", Signal: int(w.ex.ws.Signal())}
	}
	st := w.status
	switch {
	case st != nil && st.Started:
		return r.ended(w, rep, code, limit), nil
	case st != nil && (st.Exit == exitcode.NotExecutable || st.Exit == exitcode.NotFound):
		rep.Readback = mechanism.ReadbackOf(st.Readback)
		verify(rep.Protections, st.Readback)
		e.Report = rep
		return e, &mechanism.ExecError{Code: st.Exit, Command: r.cmd[0], Reason: st.Reason}
	}
	return e, r.notStarted(ctx, w, code, limit)
}

// notStarted is the set-up error of a sandbox whose command never
// started.
func (r *bwRun) notStarted(ctx context.Context, w *bwWatch, code int, limit limits.Kind) error {
	st := w.status
	switch {
	case st != nil && r.fast && st.Error != "":
		// The trampoline's only refusal: a shell that cannot set
		// RLIMIT_NPROC.
		return fault.New("the sandbox's process ceiling could not be set", st.Error,
			"make /bin/sh a shell whose ulimit sets the process limit (dash, bash, busybox ash), or report this with your /bin/sh")
	case st != nil:
		return fault.New("sandbox init failed", st.Error, "report this as a bug in sandbox-run")
	case ctx.Err() != nil:
		return fmt.Errorf("sandbox: cancelled before the command started: %w", ctx.Err())
	case limit != limits.None:
		// bwrap and init count against the limits too: a limit that
		// ended the sandbox before the command started is the cause, not
		// bwrap (make test-vm found --cpu-time spent in set-up).
		ex := w.exceeded
		if ex.Kind != limit {
			ex = limits.Exceeded{Kind: limit}
		}
		return fault.New("the sandbox was ended before the command started",
			strings.TrimSuffix((&mechanism.LimitError{Exceeded: ex}).Error(), "; the whole sandbox was ended")+
				" while bwrap and sandbox-run's init were setting it up",
			"raise the limit: the sandbox's own set-up counts against it")
	}
	return bwrapErr(bw.Diagnose(w.rl.Held(), code, bw.ReadHost(r.procSys())))
}

// failed is the set-up error of a sandbox that sandbox-run itself ended
// before the command started: a sampler that could not start, or a
// trampoline whose gate stayed shut; nil for neither.
func (w *bwWatch) failed() error {
	if w.watchErr != nil {
		return fault.New("cannot watch the sandbox's sampled limits", w.watchErr.Error(),
			"check that /proc is mounted and readable, or drop --memory, --pids and --cpu-time")
	}
	err := w.gateErr
	switch {
	case err == nil:
		return nil
	case errors.Is(err, errNProcNotHeld):
		return fault.New("the sandbox's process ceiling could not be set", err.Error(),
			"make /bin/sh a shell whose ulimit sets the process limit (dash, bash, busybox ash), or report this with your /bin/sh")
	}
	return fault.New("cannot read back the sandbox before its command starts", err.Error(),
		"check that /proc is mounted and shows the sandbox's processes (no hidepid), or report this as a bug in sandbox-run")
}

// ended reads back a command that started: its status, and the limit
// that ended it, as the loop or the kernel (a cgroup) saw it.
func (r *bwRun) ended(w *bwWatch, rep report.Report, code int, limit limits.Kind) mechanism.Ended {
	if r.fast && w.status.Readback != nil {
		if _, ok := w.fastNS["user"]; !ok && w.fastNS != nil {
			if u := userNSFromMap(w.status.Readback.UIDMap); u != "" {
				w.fastNS["user"] = u
			}
		}
		w.status.Readback.Namespaces = w.fastNS
	}
	w.readback(&rep)
	verifyHostUID(rep.Protections, w.seenUID)
	e := mechanism.Ended{Code: code, Report: rep}
	if limit == limits.None {
		return e
	}
	ex := w.exceeded
	if w.killedBy == limits.None {
		ex = limits.Exceeded{Kind: limit}
		// The kernel ended it before Watch said so (the OOM killer takes
		// PID 1 with the group): the cgroup still knows the usage and
		// the limit.
		if r.cg != nil {
			if x, ok := r.cg.Exceeded(); ok && x.Kind == limit {
				ex = x
			}
		}
	}
	e.Limit = &ex
	return e
}

// noteFull names, in the report's notes, the writable directories whose
// file system is full once the command has ended.
func noteFull(rep *report.Report) {
	full := fullDirs(rep.Writable)
	if len(full) == 0 {
		return
	}
	rep.FullFilesystems = full
	notes := slices.Clip(rep.Notes)
	for i, dir := range full {
		what := "the file system of writable directory " + dir
		if i == 0 && dir == rep.Writable[0] {
			what = "the workdir's file system (" + dir + ")"
		}
		notes = append(notes, what+" is full: writes there fail with ENOSPC (No space left on device)")
	}
	rep.Notes = notes
}
