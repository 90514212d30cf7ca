package gvisor

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"time"

	oci "github.com/sandbox-run/sandbox-run/gvisor"
	"github.com/sandbox-run/sandbox-run/internal/exitcode"
	"github.com/sandbox-run/sandbox-run/internal/fault"
	"github.com/sandbox-run/sandbox-run/internal/initproc"
	"github.com/sandbox-run/sandbox-run/internal/limits"
	"github.com/sandbox-run/sandbox-run/internal/mechanism"
	"github.com/sandbox-run/sandbox-run/report"
)

// newReport is what a tier-2 run configures; launch adds what was read
// back from inside.
func (g *gvRun) newReport(runID string, ver oci.Version, env []string, lims []report.Limit) report.Report {
	pl := g.pl
	r := report.Report{
		RunID: runID, Tier: 2, Mechanism: "gvisor", EnvNames: mechanism.EnvNames(env),
		Gvisor:     &report.GvisorReport{Path: g.runsc, Version: ver.Release, Platform: g.cfg.Platform, Rootless: g.cfg.Rootless, HostUDS: g.cfg.HostUDS},
		Namespaces: []string{"gvisor sentry: pid", "mount", "net", "ipc", "uts"},
		HostUID:    g.uid, HostGID: g.gid,
		Writable: pl.Writable, ReadOnly: pl.ReadOnly, Protected: pl.Protected,
		TmpSize:    report.TmpfsSize(pl.Tmpfs, "/tmp"),
		ReadScan:   pl.Scan.Report(len(g.p.Read)),
		Network:    g.nw.Mode,
		AllowHosts: g.p.AllowHosts,
		TLS:        g.nw.TLSReport(g.p),
		Limits:     lims,
	}
	r.Transparent = g.nw.TransparentReport()
	if g.cfg.Rootless {
		r.HostUID, r.HostGID = os.Getuid(), os.Getgid()
	}
	if g.img != nil {
		r.Image = &report.ImageReport{Reference: g.img.Reference, Digest: g.img.Digest, ID: g.img.ID}
		r.Notes = append(r.Notes, "root file system: image "+g.img.Reference+" ("+g.img.Digest+"), unpacked read-only in "+filepath.Dir(g.img.Rootfs)+"; the host's system paths are not bound")
	}
	for _, n := range pl.Notes {
		if !strings.HasPrefix(n, "binds by path") {
			r.Notes = append(r.Notes, n)
		}
	}
	r.Notes = append(r.Notes, "binds by path: runsc's gofer opens each source when the sandbox starts (no bind by descriptor)",
		"the command's stderr reaches the caller through a pipe (runsc's own messages are held until the command starts)")
	if g.memory > 0 {
		r.Notes = append(r.Notes, "sampled memory counts runsc's memory file (all the command's memory, its tmpfs and memfds included) once, plus runsc's processes' anonymous memory")
	}
	r.Tmpfs = []report.TmpfsReport{
		{Path: "/tmp", Size: g.p.TmpSize, Enforced: "tmpfs size= (gVisor kernel)"},
		{Path: "/dev/shm", Size: g.p.ShmSize, Enforced: "tmpfs size= (gVisor kernel)"},
		{Path: "/dev", Enforced: "gVisor's own devtmpfs"},
		{Path: "/", Enforced: "read-only (OCI root.readonly)"},
	}
	r.Protections = []report.Protection{
		{Name: "kernel:gvisor", Configured: true, Detail: "the command's system calls are served by gVisor's Sentry"},
		gvNetProtection(g.tun != nil),
		{Name: "no_new_privs", Configured: true},
		{Name: "capabilities:none", Configured: true},
		{Name: "uid:not-root", Configured: !g.cfg.Rootless || os.Getuid() != 0, Detail: "host uid " + strconv.Itoa(r.HostUID)},
	}
	return r
}

// gvNetProtection is what the sandbox's network is: gVisor's netstack
// with loopback only, or with the TUN device of transparent egress too,
// whose every connection the host's netstack judges.
func gvNetProtection(tun bool) report.Protection {
	if tun {
		return report.Protection{Name: "network:transparent-egress", Configured: true,
			Detail: "runsc --network=none; init's TUN device in gVisor's netstack, relayed to the host's netstack, which judges every connection"}
	}
	return report.Protection{Name: "network:loopback-only", Configured: true, Detail: "runsc --network=none"}
}

// verifyGvisor marks each protection from init's readback: the kernel's
// own log names gVisor, NoNewPrivs is 1, CapEff is empty.
func verifyGvisor(ps []report.Protection, rb *initproc.Readback) {
	if rb == nil {
		return
	}
	yes := func(b bool) *bool { return &b }
	for i := range ps {
		switch ps[i].Name {
		case "kernel:gvisor":
			ps[i].Verified = yes(rb.Kernel != nil && strings.Contains(rb.Kernel.Dmesg, "gVisor"))
		case "no_new_privs":
			if rb.NoNewPrivs >= 0 { // gVisor's status file has no such line
				ps[i].Verified = yes(rb.NoNewPrivs == 1)
			}
		case "capabilities:none":
			ps[i].Verified = yes(strings.Trim(rb.CapEff, "0") == "")
		case "uid:not-root":
			// As root the command's uid inside is the policy's, which
			// gVisor's gofer serves as that host uid; rootless, gVisor's
			// uid 0 is the caller, which is not root either.
			if os.Geteuid() == 0 {
				ps[i].Verified = yes(rb.UID != 0)
			}
		}
	}
}

// gvProc is runsc run from its start to the loop's end.
type gvProc struct {
	c          *exec.Cmd
	exited     chan error
	waitErr    error // runsc's, once Wait returned
	status     *initproc.Status
	statusDone chan struct{} // status is set
	rl         mechanism.StderrRelay
	relayDone  chan struct{}
	files      []*os.File // ours, closed by Finish
}

// Start starts `runsc run` from a locked thread (its parent-death signal
// follows the thread). Signals go through `runsc kill` once init has
// started the command, and the memory ceiling is sampled from then on.
func (g *gvRun) Start(ctx context.Context) (mechanism.Process, error) {
	gp, err := g.startRunsc()
	if err != nil {
		return mechanism.Process{}, err
	}
	g.proc = gp
	started := make(chan bool, 1)
	statusCh := make(chan *initproc.Status, 1)
	go g.readStatus(statusCh)
	go func() {
		defer close(gp.statusDone)
		gp.status = <-statusCh
		started <- gp.status != nil && gp.status.Started
	}()
	return mechanism.Process{
		Wait:    func() error { gp.waitErr = <-gp.exited; return gp.waitErr },
		Signal:  g.kill,
		Kill:    func() { g.end(gp.c) },
		Started: started,
		OnStart: func() (<-chan limits.Exceeded, error) { return g.onStart(ctx, gp.c, &gp.rl) },
	}, nil
}

// startRunsc starts runsc with the command's streams and its own stderr
// held by a relay until the command starts.
func (g *gvRun) startRunsc() (*gvProc, error) {
	gp := &gvProc{exited: make(chan error, 1), statusDone: make(chan struct{}), relayDone: make(chan struct{})}
	devnull, err := os.OpenFile(os.DevNull, os.O_RDWR, 0)
	if err != nil {
		return nil, fault.New("cannot open /dev/null", err.Error(), "check /dev")
	}
	errR, errW, err := os.Pipe()
	if err != nil {
		devnull.Close()
		return nil, fault.New("cannot create a pipe", err.Error(), "raise the descriptor limit")
	}
	gp.files = []*os.File{devnull, errR}
	if err := g.startGuard(); err != nil {
		errW.Close()
		closeAll(gp.files)
		return nil, err
	}
	c := g.runscCommand(context.Background(), "run", "--bundle", g.bundle, g.id)
	// The caller's descriptors are never handed to runsc: gVisor makes a
	// donated descriptor non-blocking, which would break the caller's own
	// writes to its terminal after the run. os/exec copies through pipes
	// for anything that is not an *os.File.
	c.Stdout, c.Stderr = writerOrNull(g.opts.Stdout, devnull), errW
	stdin, err := g.stdinPipe(devnull)
	if err != nil {
		errW.Close()
		closeAll(gp.files)
		return nil, err
	}
	gp.files = append(gp.files, stdin)
	c.Stdin = stdin
	c.SysProcAttr.Pdeathsig = syscall.SIGKILL
	started := make(chan error, 1)
	go func() {
		runtime.LockOSThread() // never unlocked: the thread ends after runsc
		err := c.Start()
		started <- err
		if err == nil {
			gp.exited <- c.Wait()
		}
	}()
	err = <-started
	errW.Close()
	if err != nil {
		closeAll(gp.files)
		return nil, fault.New("cannot start runsc", err.Error(), "check that "+g.runsc+" is executable")
	}
	gp.c = c
	gp.rl.Out = mechanism.OrNull(g.opts.Stderr, devnull)
	go func() { gp.rl.Run(errR); close(gp.relayDone) }()
	return gp, nil
}

// startGuard starts the run's group guard, once: runsc run and every
// runsc command after it (kill, delete) are started into its group, so
// that none outlives a sandbox-run killed meanwhile. runsc run's death
// signal covers runsc run alone; runsc kill and delete carry none.
func (g *gvRun) startGuard() error {
	if g.guard != nil {
		return nil
	}
	gd, err := mechanism.StartGroupGuard()
	if err != nil {
		return err
	}
	g.guard = gd
	g.undo.Push(gd.End)
	return nil
}

// runscCommand is runsc's subcommand sub with the run's global flags, an empty
// environment (runsc gets nothing of ours), started into the guard's
// process group.
func (g *gvRun) runscCommand(ctx context.Context, sub string, args ...string) *exec.Cmd {
	argv := g.cfg.Args(g.runsc, sub, args...)
	c := exec.CommandContext(ctx, argv[0], argv[1:]...)
	c.Env = []string{}
	c.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if g.guard != nil {
		g.guard.Join(c.SysProcAttr)
	}
	return c
}

func closeAll(fs []*os.File) {
	for _, f := range fs {
		f.Close()
	}
}

// stdinPipe is what runsc reads as the command's stdin: a pipe fed from
// the caller's stdin by a goroutine that is not waited for (a read of a
// terminal would hold the run's end); the caller closes the read end.
func (g *gvRun) stdinPipe(null *os.File) (*os.File, error) {
	if g.opts.Stdin == nil {
		return os.Open(os.DevNull)
	}
	r, w, err := os.Pipe()
	if err != nil {
		return nil, fault.New("cannot create a pipe", err.Error(), "raise the descriptor limit")
	}
	go func() {
		io.Copy(w, g.opts.Stdin)
		w.Close()
	}()
	return r, nil
}

// writerOrNull hides the *os.File so that os/exec relays through a pipe
// of its own.
func writerOrNull(f, null *os.File) io.Writer {
	if f == nil {
		return null
	}
	return struct{ io.Writer }{f}
}

// readStatus accepts init's one connection and decodes its status line;
// nil when none came (runsc failed before init ran).
func (g *gvRun) readStatus(out chan<- *initproc.Status) {
	conn, err := g.status.Accept()
	if err != nil {
		out <- nil
		return
	}
	defer conn.Close()
	b, _ := io.ReadAll(io.LimitReader(conn, 1<<20))
	s, err := initproc.DecodeStatus([]byte(strings.TrimSpace(string(b))))
	if err != nil {
		s = initproc.Status{Error: err.Error(), Exit: exitcode.Setup}
	}
	out <- &s
}

// Finish waits for init's status and runsc's stderr, removes what runsc
// left and reads the command's end.
func (g *gvRun) Finish(ctx context.Context, end mechanism.Ending) (mechanism.Ended, error) {
	gp := g.proc
	// runsc is gone: close the listener so a status that never came ends.
	g.status.Close()
	<-gp.statusDone
	<-gp.relayDone
	closeAll(gp.files)
	g.deleteState()
	code := exitcode.Setup
	var ee *exec.ExitError
	if gp.waitErr == nil {
		code = 0
	} else if errors.As(gp.waitErr, &ee) {
		code = mechanism.WaitCode(ee.Sys().(syscall.WaitStatus))
	}
	return g.ended(ctx, code, gp.status, &gp.rl, end.Cancelled)
}

// onStart is what follows init's report that the command started: runsc's
// sandbox and gofer exist now, and the command's memory is the sandbox
// process's.
func (g *gvRun) onStart(ctx context.Context, c *exec.Cmd, rl *mechanism.StderrRelay) (<-chan limits.Exceeded, error) {
	g.oom = mechanism.RaiseOOM(c.Process.Pid)
	over, err := g.watchMemory(ctx, c.Process.Pid)
	if err != nil {
		// Fail closed: the report would claim a limit nobody holds.
		return nil, fault.New("cannot watch the sandbox's memory ceiling", err.Error(),
			"check that /proc is mounted and readable, or pass --memory none")
	}
	// runsc's gofer holds the bound sockets now: their directory goes, so
	// a SIGKILL later leaves none.
	g.nw.Release()
	rl.Start()
	return over, nil
}

// watchMemory samples runsc's process tree below pid against the run's
// memory ceiling; a nil channel when there is none, or when runsc has
// already ended (nothing left to hold).
func (g *gvRun) watchMemory(ctx context.Context, pid int) (<-chan limits.Exceeded, error) {
	m := g.memory
	if m == 0 {
		return nil, nil
	}
	ch, err := limits.SampleGVisor(ctx, pid, limits.Limits{Memory: m}, limits.DefaultInterval)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	return ch, err
}

// ended reads what runsc and init said of the command's end: its
// status, or why it never ran.
func (g *gvRun) ended(ctx context.Context, code int, status *initproc.Status, rl *mechanism.StderrRelay, killed bool) (mechanism.Ended, error) {
	r := g.report
	r.OOMScoreAdj = g.oom
	e := mechanism.Ended{Code: code}
	switch {
	case status != nil && status.Started:
		g.tun.confirm(&r)
		r.Readback = mechanism.ReadbackOf(status.Readback)
		verifyGvisor(r.Protections, status.Readback)
		e.Report = r
		return e, nil
	case status != nil && (status.Exit == exitcode.NotExecutable || status.Exit == exitcode.NotFound):
		r.Readback = mechanism.ReadbackOf(status.Readback)
		verifyGvisor(r.Protections, status.Readback)
		e.Report = r
		return e, &mechanism.ExecError{Code: status.Exit, Command: g.cmd[0], Reason: status.Reason}
	case status != nil:
		return e, fault.New("sandbox init failed under gVisor", status.Error, "report this as a bug in sandbox-run")
	case killed || ctx.Err() != nil:
		return e, fmt.Errorf("sandbox: cancelled before the command started: %w", ctx.Err())
	}
	why := lastLine(rl.Held())
	if why == "" {
		why = "runsc exited with status " + strconv.Itoa(code) + " before the command started"
	}
	return e, fault.New("runsc could not start the sandbox", why, "run sandbox-run check and see its tier 2 line")
}

// end ends the whole sandbox: its init through runsc, and runsc run.
func (g *gvRun) end(c *exec.Cmd) {
	g.kill(syscall.SIGKILL)
	c.Process.Kill()
}

// kill sends sig to the container's init through runsc.
func (g *gvRun) kill(sig os.Signal) {
	s, ok := sig.(syscall.Signal)
	if !ok {
		return
	}
	g.runscCommand(context.Background(), "kill", g.id, strconv.Itoa(int(s))).Run()
}

// deleteState removes what runsc left in its state root when the run did
// not end by itself (runsc run deletes its container on a normal end).
func (g *gvRun) deleteState() {
	ents, err := os.ReadDir(g.cfg.Root)
	if err != nil || len(ents) == 0 {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	g.runscCommand(ctx, "delete", "--force", g.id).Run()
}

func lastLine(s string) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	return strings.TrimSpace(lines[len(lines)-1])
}
