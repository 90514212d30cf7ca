package bwrap

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"os"
	"strings"

	bw "github.com/sandbox-run/sandbox-run/bwrap"
	"github.com/sandbox-run/sandbox-run/filter"
	"github.com/sandbox-run/sandbox-run/internal/fault"
	"github.com/sandbox-run/sandbox-run/internal/hostnet"
	"github.com/sandbox-run/sandbox-run/internal/initproc"
	"github.com/sandbox-run/sandbox-run/internal/limits"
	"github.com/sandbox-run/sandbox-run/internal/mechanism"
	"github.com/sandbox-run/sandbox-run/internal/ociimage"
	"github.com/sandbox-run/sandbox-run/internal/plan"
	"github.com/sandbox-run/sandbox-run/mount"
	"github.com/sandbox-run/sandbox-run/policy"
	"github.com/sandbox-run/sandbox-run/report"
)

// bwRun is tier 1 under bubblewrap: the mount plan, the network, the
// limits and the seccomp program, set up by prepare; run starts bwrap
// and supervises it (bwrap_launch_linux.go).
type bwRun struct {
	p    policy.Policy
	cmd  []string
	opts mechanism.Config
	log  *slog.Logger
	undo mechanism.Cleanups

	path     string // the bwrap binary
	info     *bw.Info
	arch     filter.Arch
	prog     *filter.Program
	uid, gid int
	root     bool // sandbox-run runs as root; the sandbox as uid, gid
	runID    string
	pl       *plan.Plan
	img      *ociimage.Image   // the root file system's image (--image); nil: the host's
	lend     *ownerLend        // --map-owner; nil: none
	planned  mechanism.Planned // the skeleton's plan, as Prepare got it
	nw       *hostnet.Network
	tty      bool // the command's streams are the skeleton's terminal
	env      []string
	lim      limits.Plan
	cg       *limits.Cgroup // nil: no cgroup
	inotify  limits.Inotify // set in the sandbox's user namespace; zero: none
	fast     bool           // no init: bwrap's PID 1 and the trampoline
	// brokerChild is init's end of the connect broker's socket (passed
	// after the gate), broker the launcher's (hostnet.ServeBroker); nil
	// without the broker.
	brokerChild, broker *os.File
	nproc               uint64   // the trampoline's RLIMIT_NPROC, 0: none
	argv                []string // bwrap's command line
	args                []string // bwrap's argument stream
	// argsNet is the stream for bwrap started in the network namespace
	// helper's namespace (no --unshare-net); nil without transparent
	// egress planned (see startTransparent).
	argsNet []string
	netMade bool // bwrap runs in the helper's network namespace
	// helperInotify says why the network namespace helper could not set
	// the inotify ceiling in its user namespace, the sandbox's parent
	// (empty: it did, when netMade).
	helperInotify string
	// guard leads the process group bwrap is started into and kills it
	// if sandbox-run dies (mechanism.GroupGuard); nil until the first fork.
	guard *mechanism.GroupGuard
	// notRunnable is the fast path's finding that the command cannot be
	// started, reported by Start once the report exists.
	notRunnable *mechanism.ExecError
	report      report.Report
	watch       *bwWatch // the started bwrap; nil before Start
	// setup is what the skeleton set up for the run (Attach).
	setup mechanism.Setup
}

func New(p policy.Policy, cmd []string, opts mechanism.Config) (mechanism.Mechanism, error) {
	return &bwRun{p: p, cmd: cmd, opts: opts, log: opts.Log()}, nil
}

func (r *bwRun) Close(*mechanism.Result) { r.undo.Run() }

func (r *bwRun) Probe(ctx context.Context) (mechanism.Host, error) {
	for _, step := range []func(context.Context) error{r.tools, r.ids, r.checkMapOwner} {
		if err := step(ctx); err != nil {
			return mechanism.Host{}, err
		}
	}
	l := &plan.Layout{ByFD: r.info.Features.BindFD, FDBase: fdBinds, Size: r.info.Features.Size}
	if r.opts.MapOwner {
		l.Lent = r.p.Workdir
	}
	return mechanism.Host{UID: r.uid, GID: r.gid, Root: r.root, Layout: l, Ceilings: true,
		Net: hostnet.Reach{Kind: hostnet.ViaSockets}, Terminal: r.opts.Terminal != nil}, nil
}

func (r *bwRun) Prepare(ctx context.Context, pd mechanism.Planned) error {
	r.p, r.pl, r.runID, r.planned = pd.Policy, pd.Plan, r.opts.RunID, pd
	if len(r.p.Read) > 0 {
		r.log.Debug("searched --read paths for sockets and FIFOs", "entries", r.pl.Scan.Entries,
			"elapsed", r.pl.Scan.Elapsed, "covered", len(r.pl.Scan.Covered))
	}
	for _, step := range []func(context.Context) error{r.image, r.lendOwner} {
		if err := step(ctx); err != nil {
			return err
		}
	}
	return nil
}

func (r *bwRun) Attach(ctx context.Context, s mechanism.Setup) (*report.Report, error) {
	r.nw, r.setup = s.Net.Sockets, s
	steps := []func(context.Context) error{
		r.network, r.bindNetwork, r.terminal, r.environment, r.limits, r.imageBinds, r.command, r.bwrapArgs,
	}
	for _, step := range steps {
		if err := step(ctx); err != nil {
			return nil, err
		}
	}
	r.buildReport()
	return &r.report, nil
}

// tools finds and vets bwrap and assembles the seccomp program.
func (r *bwRun) tools(ctx context.Context) error {
	path, err := findBwrap(r.opts.Resolver, r.opts.BwrapPath, r.p.Writable())
	if err != nil {
		return err
	}
	r.path = path
	if r.info, err = (bw.Detector{CacheDir: r.opts.BwrapCache, Resolver: r.opts.Resolver}).Detect(ctx, path); err != nil {
		return &fault.Error{What: "cannot use bwrap " + path, Why: err.Error(),
			Fix: "install bubblewrap (apt-get install -y bubblewrap) or pass --bwrap PATH"}
	}
	if err := r.info.Required(); err != nil {
		return &fault.Error{What: "bwrap too old", Why: err.Error(), Fix: "install bubblewrap 0.4.0 or newer"}
	}
	// The sysctls alone: the rest of bwrap.Host serves only the diagnosis
	// of a bwrap that failed, and classify reads it then.
	if err := bw.Preflight(bw.ReadSysctls(r.procSys())); err != nil {
		return bwrapErr(err)
	}
	if r.arch, err = filter.NativeArch(); err != nil {
		return &fault.Error{What: "no seccomp filter for this machine", Why: err.Error(),
			Fix: "run on x86_64 or aarch64, or ask for tier 0 explicitly with --sandbox off"}
	}
	if r.p.Ptrace {
		var pe *filter.PtraceError
		if errors.As(filter.CheckPtrace(filter.YamaPtraceScope()), &pe) {
			return &fault.Error{What: "--ptrace refused", Why: pe.Reason, Fix: pe.Fix, Err: pe}
		}
	}
	if r.prog, err = filter.Assemble(r.arch, filter.Options{AllowPtrace: r.p.Ptrace, NoSetID: r.opts.MapOwner}); err != nil {
		return &fault.Error{What: "cannot assemble the seccomp filter", Why: err.Error(), Fix: "report this as a bug in sandbox-run"}
	}
	return nil
}

// procSys is where the kernel's settings are read.
func (r *bwRun) procSys() string {
	if r.opts.ProcSys == "" {
		return "/proc/sys"
	}
	return r.opts.ProcSys
}

// ids picks the host uid and gid the sandbox runs as: the caller's, or
// the policy's when sandbox-run is root (never uid 0).
func (r *bwRun) ids(context.Context) (err error) {
	r.uid, r.gid, r.root, err = mechanism.HostIDs(r.p)
	return err
}

// network plans transparent egress on the run's network, when it has
// an allow-list.
func (r *bwRun) network(context.Context) error {
	return r.nw.PlanTransparent()
}

// bindNetwork binds the network's sockets into the plan.
func (r *bwRun) bindNetwork(context.Context) error {
	for _, b := range r.nw.Binds {
		if err := r.pl.BindSocket(b[0], b[1]); err != nil {
			return err
		}
	}
	return nil
}

// terminal makes the skeleton's terminal, when there is one, the
// command's streams; init makes it the command's controlling terminal.
func (r *bwRun) terminal(context.Context) error {
	if t := r.setup.TTY; t != nil {
		r.tty = true
		r.opts.Stdin, r.opts.Stdout, r.opts.Stderr = t, t, t
	}
	return nil
}

func (r *bwRun) environment(context.Context) error {
	netEnv := r.nw.Env
	if len(r.setup.Env) > 0 {
		netEnv = maps.Clone(netEnv)
		maps.Copy(netEnv, r.setup.Env)
	}
	env, err := mechanism.CommandEnv(r.p, netEnv, r.opts.LookupEnv)
	if err != nil {
		return err
	}
	r.env = bindGitHint(r.pl, r.p, env, r.opts.BwrapCache, r.uid, r.gid)
	if r.img != nil {
		r.env = plan.ImageEnv(r.env, r.img.Env, r.p)
	}
	return nil
}

func (r *bwRun) limits(context.Context) error {
	lim, cg, err := setupLimits(r.planned, r.runID)
	if err != nil {
		return err
	}
	r.lim, r.cg = lim, cg
	if cg != nil {
		r.undo.Push(func() { cg.Close() })
	}
	// A kernel without inotify (no /proc/sys/fs/inotify) needs no
	// ceiling: the report then says none.
	r.inotify, _ = limits.DefaultInotify()
	return nil
}

// command decides what bwrap starts: sandbox-run's init when it has work
// (forwarding, a terminal, rlimits beyond the two the trampoline sets
// itself: core dumps off and the process ceiling), otherwise the fast
// path, bwrap's own PID 1 and a sh trampoline.
func (r *bwRun) command(context.Context) error {
	initCfg := initproc.Config{StatusFD: fdStatus, StderrFD: fdStderr, Forward: r.nw.Forwards, Publish: r.nw.Publish, Command: r.cmd, TTY: r.tty}
	nproc, shimOnly := initproc.SplitRlimits(r.lim.Rlimits)
	r.nproc = nproc
	// An image's command is found in the image's tree by init, not on
	// the host's paths the fast path resolves it against.
	r.fast = len(initCfg.Forward)+len(initCfg.Publish) == 0 && !shimOnly && !initCfg.TTY && r.img == nil
	head := []string{r.path, "--args", fmt.Sprint(fdArgs), "--"}
	if !r.fast {
		// Init's go-ahead, after every bind descriptor (see start): the
		// watch opens it once init runs (onReady).
		initCfg.GateFD = fdBinds + len(r.pl.Files)
		initCfg.Rlimits = r.lim.Rlimits
		if child, parent := r.nw.PlanBroker(r.log); child != nil {
			r.undo.Push(func() { child.Close(); parent.Close() })
			r.brokerChild, r.broker = child, parent
			initCfg.BrokerFD = initCfg.GateFD + 1 // right after the gate (start)
		}
		r.argv = append(append(head, fmt.Sprintf("/proc/self/fd/%d", fdInit), initproc.Arg), initCfg.Args()...)
		return nil
	}
	pl := r.pl
	visible := append(append(append([]string(nil), plan.SystemPaths...), pl.Writable...), pl.ReadOnly...)
	resolved, err := resolveCommand(r.cmd[0], r.p.Workdir, r.env, visible, r.uid, r.gid)
	if err != nil {
		r.notRunnable, resolved = err.(*mechanism.ExecError), r.cmd[0]
	} else {
		resolved = viaGitHint(r.cmd[0], resolved, r.env)
	}
	r.argv = append(head, trampolineArgs(resolved, r.cmd, nproc)...)
	return nil
}

// bwrapArgs builds bwrap's argument stream from the plan.
func (r *bwRun) bwrapArgs(context.Context) error {
	mounts := append(append([]mount.Step(nil), r.pl.Mounts...), r.pl.Late...)
	args, err := bw.Args(bwrapSpec(r.info.Features, !r.fast, mounts, r.p.Workdir, r.env))
	if err != nil {
		return &fault.Error{What: "cannot build bwrap arguments", Why: err.Error(), Fix: "remove the NUL byte"}
	}
	if err := bw.CheckArgCount(r.argv, args); err != nil {
		return fault.New("command line too long for bwrap", err.Error(),
			"pass a long list through a file or stdin (xargs inside the sandbox), or bind a common parent instead of many --read paths")
	}
	r.args = args
	if r.nw.Tun != nil && !r.fast {
		spec := bwrapSpec(r.info.Features, true, mounts, r.p.Workdir, r.env)
		spec.NetMade = true
		if r.argsNet, err = bw.Args(spec); err != nil {
			return &fault.Error{What: "cannot build bwrap arguments", Why: err.Error(), Fix: "remove the NUL byte"}
		}
	}
	return nil
}

// bwrapSpec is the whole of what bwrap is asked for, given its features:
// pure, so the layout goldens render exactly what a run passes. asPid1 is
// set when sandbox-run's init, not bwrap's, is the sandbox's PID 1.
func bwrapSpec(f bw.Features, asPid1 bool, mounts []mount.Step, workdir string, env []string) bw.Spec {
	return bw.Spec{
		AsPid1:           asPid1,
		UnshareCgroupTry: f.UnshareCgroupTry,
		DisableUserns:    f.DisableUserns,
		UID:              -1, GID: -1,
		Hostname:   "sandbox",
		Mounts:     mounts,
		Chdir:      workdir,
		ClearEnv:   f.ClearEnv,
		Env:        env,
		SeccompFD:  fdSeccomp,
		InfoFD:     fdInfo,
		SizeOption: f.Size,
	}
}

// buildReport says what prepare set up; run adds what it reads back.
func (r *bwRun) buildReport() {
	p, pl, f := r.p, r.pl, r.info.Features
	rep := report.Report{
		Tier: 1, Mechanism: "bwrap", EnvNames: mechanism.EnvNames(r.env),
		Bwrap:      &report.BwrapReport{Path: r.path, Version: r.info.Version.String(), Features: f},
		Namespaces: []string{"user", "mount", "pid", "ipc", "uts", "net"},
		HostUID:    r.uid, HostGID: r.gid,
		Writable: pl.Writable, ReadOnly: pl.ReadOnly, Protected: pl.Protected,
		Watched: pl.Prot.Watched, ProtectWalk: &pl.Prot.Walk, Quarantined: pl.Quarantined,
		TmpSize:    report.TmpfsSize(pl.Tmpfs, "/tmp"),
		Tmpfs:      pl.Tmpfs,
		ReadScan:   pl.Scan.Report(len(p.Read)),
		WriteScan:  pl.WScan.Report(len(pl.Writable)),
		BindsByFD:  f.BindFD,
		RunID:      r.runID,
		Network:    r.nw.Mode,
		AllowHosts: p.AllowHosts,
		TLS:        r.nw.TLSReport(p),
		Notes:      pl.Notes,
		Seccomp:    &report.SeccompReport{Digest: r.prog.Digest(), Arch: r.arch.String(), Ptrace: p.Ptrace, Readback: -1},
	}
	rep.Transparent = r.nw.TransparentReport()
	if f.UnshareCgroupTry {
		rep.Namespaces = append(rep.Namespaces, "cgroup (if the kernel allows)")
	}
	for _, a := range r.info.Advisories() {
		rep.Bwrap.Advisories = append(rep.Bwrap.Advisories, report.Advisory(a))
	}
	rep.Protections = bwrapProtections(f.DisableUserns, f.BindFD, f.UnshareCgroupTry, r.uid, r.prog.Digest())
	rep.Limits = append(append(mechanism.TimeoutLimit(p), mechanism.LimitReport(r.lim, p)...), mechanism.InotifyLimits(r.inotify)...)
	if n := mechanism.SampledMemoryNote(r.lim, true); n != "" {
		rep.Notes = append(rep.Notes, n)
	}
	r.imageReport(&rep)
	r.lendReport(&rep)
	r.report = rep
}

// describe prints bwrap's command line, its argument stream (values
// redacted) and the descriptors the binds come from, and init's binary
// when the run has an init.
func (r *bwRun) Describe(w io.Writer) {
	fmt.Fprintf(w, "argv: %s\n", strings.Join(mechanism.QuoteAll(r.argv), " "))
	fmt.Fprintf(w, "args stream (fd %d):\n", fdArgs)
	for _, a := range bw.Redact(r.args) {
		fmt.Fprintf(w, "  %s\n", mechanism.Quote(a))
	}
	fmt.Fprintf(w, "descriptors:\n")
	if !r.fast {
		if f, err := r.openInit(); err == nil {
			name := f.Name()
			if name == selfPath(r.opts) {
				name, _ = os.Executable()
			}
			fmt.Fprintf(w, "  %d = %s (init)\n", fdInit, name)
			f.Close()
		}
	}
	for _, m := range r.pl.Mounts {
		if m.FD >= 0 {
			fmt.Fprintf(w, "  %d = %s\n", m.FD, m.Src)
		}
	}
}

// Start starts bwrap: the command starts inside once init or the
// trampoline has passed its gate.
func (r *bwRun) Start(ctx context.Context) (mechanism.Process, error) {
	if e := r.notRunnable; e != nil {
		return mechanism.Process{}, e
	}
	r.log.Debug("starting bwrap", "bwrap_argv", r.argv, "mounts", len(r.pl.Mounts))
	bp, err := r.start()
	if err != nil {
		return mechanism.Process{}, err
	}
	r.watch = r.newWatch(ctx, bp)
	return r.watch.process(), nil
}

// Finish reads back how the command ended.
func (r *bwRun) Finish(ctx context.Context, end mechanism.Ending) (mechanism.Ended, error) {
	r.watch.after(end)
	return r.classify(ctx, r.watch)
}
