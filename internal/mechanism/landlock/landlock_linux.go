package landlock

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	llsys "github.com/landlock-lsm/go-landlock/landlock/syscall"
	"golang.org/x/sys/unix"

	"github.com/sandbox-run/sandbox-run/filter"
	"github.com/sandbox-run/sandbox-run/internal/fault"
	"github.com/sandbox-run/sandbox-run/internal/hostnet"
	"github.com/sandbox-run/sandbox-run/internal/limits"
	"github.com/sandbox-run/sandbox-run/internal/mechanism"
	"github.com/sandbox-run/sandbox-run/internal/plan"
	"github.com/sandbox-run/sandbox-run/internal/procid"
	"github.com/sandbox-run/sandbox-run/internal/protect"
	llrules "github.com/sandbox-run/sandbox-run/landlock"
	"github.com/sandbox-run/sandbox-run/mount"
	"github.com/sandbox-run/sandbox-run/policy"
	"github.com/sandbox-run/sandbox-run/report"
)

// The device files a command under landlock may use: written, and read.
var (
	llDevWrite = []string{"/dev/null", "/dev/zero", "/dev/full"}
	llDevRead  = []string{"/dev/random", "/dev/urandom"}
)

// TmpPrefix names a landlock run's TMPDIR in the host's temporary
// directory: TmpPrefix+PID.START.NS-hRANDOM (see hostnet.MakeRunDir).
const TmpPrefix = "sandbox-run-landlock-tmp-"

// landlockFix is the fix a refusal of --sandbox landlock offers.
const landlockFix = "run --sandbox bwrap where user namespaces work (sandbox-run check says why they do not)"

// landlockABI returns the kernel's Landlock ABI, 0 when it has none or
// has it disabled.
func landlockABI() int {
	v, err := llsys.LandlockGetABIVersion()
	if err != nil {
		return 0
	}
	return v
}

// llRun is one landlock run's state, built by prepare and undone by close.
type llRun struct {
	p        policy.Policy
	cmd      []string
	opts     mechanism.Config
	report   report.Report
	rs       *llrules.Ruleset
	spec     landlockSpec
	lim      limits.Plan
	uid, gid int
	tmp      string            // the run's TMPDIR, removed by close
	unhold   func()            // drops the lock that marks tmp live (hostnet.MakeRunDir), once it is removed
	swept    func()            // waits for the sweep of killed runs' TMPDIRs; nil before it starts
	planned  mechanism.Planned // the skeleton's plan, as Prepare got it
	setup    mechanism.Setup   // what the skeleton set up (Attach): the network, the terminal
	pl       *plan.Plan        // the run's plan, by path, with its copies (plan.Layout.Copies)
	unheld   []Unheld          // what of the plan Landlock cannot hold (translate)
	prot     protect.State
	own      []string          // sandbox-run's state dirs (sessions' homes, caches): names not protected
	nw       *hostnet.Loopback // the run's loopback ports (the skeleton's); nil before Attach
	c        *exec.Cmd         // the shim, then the command; nil before Start
}

// New runs cmd under Landlock and the seccomp filter,
// without namespaces: tier 1 with the losses llrules.Translate names, each
// in the report. It refuses (exit 125) a kernel below llrules.MinABI and
// a network below llrules.NetABI. Protected paths, which Landlock cannot
// hold read-only beneath a writable grant, are copied and put back after
// the run (landlock_protect_linux.go).
func New(p policy.Policy, cmd []string, opts mechanism.Config) (mechanism.Mechanism, error) {
	return &llRun{p: p, cmd: cmd, opts: opts}, nil
}

func (r *llRun) Probe(context.Context) (mechanism.Host, error) {
	var err error
	if r.uid, r.gid, _, err = mechanism.HostIDs(r.p); err != nil {
		return mechanism.Host{}, err
	}
	// The plan by path: Landlock binds nothing, and keeps copies of the
	// protected paths it cannot hold (landlock_protect_linux.go).
	// Landlock confines TCP connect by port, not by address: the network
	// is served on host loopback ports.
	return mechanism.Host{UID: r.uid, GID: r.gid, Root: os.Geteuid() == 0, Layout: &plan.Layout{Size: true, Copies: true}, Ceilings: true,
		Net: hostnet.Reach{Kind: hostnet.ViaLoopback, Mechanism: "landlock"}, Terminal: r.opts.Terminal != nil}, nil
}

func (r *llRun) Prepare(_ context.Context, pd mechanism.Planned) error {
	r.report.RunID = r.opts.RunID
	r.p, r.pl, r.planned = pd.Policy, pd.Plan, pd
	r.own, r.prot = r.pl.Own, r.pl.Prot
	return nil
}

func (r *llRun) Attach(_ context.Context, s mechanism.Setup) (*report.Report, error) {
	r.nw, r.setup = s.Net.Loopback, s
	if t := s.TTY; t != nil {
		// The skeleton's terminal, never the caller's: the shim makes it
		// the command's controlling terminal (spawn).
		r.opts.Stdin, r.opts.Stdout, r.opts.Stderr = t, t, t
	}
	if err := r.setUp(); err != nil {
		return nil, err
	}
	return &r.report, nil
}

func (r *llRun) AuditStart() map[string]any {
	return map[string]any{"landlock_abi": r.report.Landlock.ABI}
}

// describe writes what would run: the shim, the ruleset, the filter and
// the environment's names (values are never printed).
func (r *llRun) Describe(w io.Writer) {
	cmd := r.cmd
	fmt.Fprintf(w, "argv: sandbox-run %s (spec on fd %d) -> %s\n", Arg, llFdSpec, strings.Join(mechanism.QuoteAll(cmd), " "))
	fmt.Fprintf(w, "landlock: %s (kernel ABI %d)\n", r.rs.Config, r.spec.Input.ABI)
	for _, rule := range r.rs.Rules {
		fmt.Fprintf(w, "  %v\n", rule)
	}
	fmt.Fprintf(w, "seccomp: %s\n", r.report.Seccomp.Digest)
	fmt.Fprintf(w, "env (values redacted): %s\n", strings.Join(r.report.EnvNames, " "))
}

func (r *llRun) Close(*mechanism.Result) {
	if r.tmp != "" {
		os.RemoveAll(r.tmp)
		r.unhold()
	}
	if r.swept != nil {
		r.swept()
	}
}

// setUp decides the ruleset and builds the shim's spec and the report;
// nothing of the command runs yet.
func (r *llRun) setUp() error {
	p := r.p
	ports := r.ports()
	in, err := r.paths()
	if err != nil {
		return err
	}
	in.ABI, in.ConnectPorts = landlockABI(), ports
	r.rs, err = llrules.Translate(in)
	if err != nil {
		return &fault.Error{What: "--sandbox landlock", Why: err.Error(), Fix: landlockFix}
	}
	prog, err := r.filter(ports == nil)
	if err != nil {
		return err
	}
	netEnv := r.nw.Env
	if len(r.setup.Env) > 0 {
		netEnv = maps.Clone(netEnv)
		maps.Copy(netEnv, r.setup.Env)
	}
	env, err := mechanism.CommandEnv(p, netEnv, r.opts.LookupEnv)
	if err != nil {
		return err
	}
	env = withTmpdir(env, p, r.tmp)
	if err := r.limits(); err != nil {
		return err
	}
	r.spec = landlockSpec{Input: in, Filter: prog.Bytes(), Rlimits: r.lim.Rlimits, Env: env}
	r.buildReport(prog, r.nw.Mode, env)
	return nil
}

// ports are the run's loopback ports, which the ruleset lets the command
// connect to; nil: no network at all.
func (r *llRun) ports() (ports []uint16) {
	for _, port := range []uint16{r.nw.ProxyPort, r.nw.LLMPort} {
		if port != 0 {
			ports = append(ports, port)
		}
	}
	return ports
}

// paths translates the run's plan into what the command may read and
// write (translate): the plan's system paths, /proc, --read paths and
// writable dirs, the run's own TMPDIR for the plan's /tmp and the
// harmless device files for its /dev. What Landlock cannot hold of the
// plan is kept in r.unheld for the report.
func (r *llRun) paths() (llrules.Input, error) {
	tmp, err := r.makeTmp()
	if err != nil {
		return llrules.Input{}, err
	}
	steps := append(append([]mount.Step(nil), r.pl.Mounts...), r.pl.Late...)
	in, unheld := translate(steps, hostFacts(steps, tmp))
	r.unheld = unheld
	return in, nil
}

// makeTmp creates the run's own TMPDIR, the uid's, which stands for the
// sandbox's private /tmp.
func (r *llRun) makeTmp() (string, error) {
	// Named for this process, so that a later run sweeps it when
	// sandbox-run was killed before it could remove it.
	r.swept = hostnet.StartSweep(os.TempDir(), TmpPrefix, r.uid)
	me, _, err := procid.Self()
	if err != nil {
		return "", fault.New("cannot read this process's start time", err.Error(), "mount /proc")
	}
	tmp, unhold, err := hostnet.MakeRunDir(TmpPrefix, me)
	if err != nil {
		return "", fault.New("cannot create the run's TMPDIR", err.Error(), "check that $TMPDIR is writable")
	}
	r.tmp, r.unhold = tmp, unhold
	if os.Geteuid() == 0 {
		if err := os.Chown(tmp, r.uid, r.gid); err != nil {
			return "", fault.New("cannot hand the run's TMPDIR to uid "+strconv.Itoa(r.uid), err.Error(), "check $TMPDIR")
		}
	}
	return tmp, nil
}

// hostFacts learns what translate needs of the host beyond the plan:
// which bind sources are files (the plan vetted each one) and which of
// the harmless device files the host has.
func hostFacts(steps []mount.Step, tmp string) Facts {
	f := Facts{Files: map[string]bool{}, Tmp: tmp}
	for _, m := range steps {
		if (m.Kind != mount.ROBind && m.Kind != mount.Bind) || m.Src == os.DevNull {
			continue
		}
		if fi, err := os.Stat(m.Src); err == nil && !fi.IsDir() {
			f.Files[m.Src] = true
		}
	}
	for _, d := range llDevWrite {
		if _, err := os.Stat(d); err == nil {
			f.DevWrite = append(f.DevWrite, d)
		}
	}
	for _, d := range llDevRead {
		if _, err := os.Stat(d); err == nil {
			f.DevRead = append(f.DevRead, d)
		}
	}
	return f
}

// filter assembles the seccomp program for a command on the host's
// namespaces.
func (r *llRun) filter(noSockets bool) (*filter.Program, error) {
	arch, err := filter.NativeArch()
	if err != nil {
		return nil, &fault.Error{What: "no seccomp filter for this machine", Why: err.Error(),
			Fix: "run on x86_64 or aarch64, or ask for tier 0 explicitly with --sandbox off"}
	}
	if r.p.Ptrace {
		var pe *filter.PtraceError
		if errors.As(filter.CheckPtrace(filter.YamaPtraceScope()), &pe) {
			return nil, &fault.Error{What: "--ptrace refused", Why: pe.Reason, Fix: pe.Fix, Err: pe}
		}
	}
	prog, err := filter.Assemble(arch, filter.Options{AllowPtrace: r.p.Ptrace, HostNamespaces: true, NoSockets: noSockets})
	if err != nil {
		return nil, &fault.Error{What: "cannot build the seccomp filter", Why: err.Error(), Fix: "report this bug"}
	}
	return prog, nil
}

// limits plans the rlimits the shim applies and the limits sampled from
// /proc: without a user namespace RLIMIT_NPROC counts every process of
// the uid on the host, so the process ceiling is sampled, as in tier 0.
func (r *llRun) limits() error {
	lim, err := limits.NewPlan(r.planned.Limits, limits.Env{DefaultMemory: r.planned.DefaultMemory})
	if err != nil {
		return &fault.Error{What: "limits", Why: err.Error(), Fix: "pass positive limits"}
	}
	r.lim = lim
	return nil
}

// withTmpdir points TMPDIR, and HOME when it would be the private /tmp
// bwrap gives (no --home, --session or HOME of the policy's), at the run's
// own directory; a value the policy names itself stays.
func withTmpdir(env []string, p policy.Policy, tmp string) []string {
	for i, kv := range env {
		k, v, _ := strings.Cut(kv, "=")
		if _, own := p.Env[k]; own {
			continue
		}
		if k == "TMPDIR" || (k == "HOME" && p.Home == "" && v == "/tmp") {
			env[i] = k + "=" + tmp
		}
	}
	return env
}

// buildReport states what prepare set up; supervise adds the read-back.
func (r *llRun) buildReport(prog *filter.Program, mode string, env []string) {
	p, rs := r.p, r.rs
	rep := report.Report{RunID: r.report.RunID, Tier: 1, Mechanism: "landlock", HostUID: r.uid, HostGID: r.gid, EnvNames: mechanism.EnvNames(env),
		Writable: p.Writable(), ReadOnly: append(append([]string{}, r.spec.Input.ReadDirs...), r.spec.Input.ReadFiles...),
		Network: mode, AllowHosts: p.AllowHosts, Transparent: mechanism.TransparentLost(mode, mechanism.NoTransparentLandlock),
		Seccomp:  &report.SeccompReport{Digest: prog.Digest(), Arch: prog.Arch().String(), Ptrace: p.Ptrace, Readback: -1},
		Landlock: &report.LandlockReport{ABI: rs.ABI, KernelABI: r.spec.Input.ABI, NetworkByPort: rs.Network, Scoped: rs.Scoped}}
	for _, l := range rs.Losses {
		rep.Losses = append(rep.Losses, report.Loss{Name: l.Name, Detail: l.Detail})
	}
	// What of this run's plan Landlock cannot hold, by place: after the
	// ruleset's own losses, which say why in general.
	for _, u := range r.unheld {
		rep.Losses = append(rep.Losses, report.Loss{Name: u.Name, Detail: u.What + ": " + strings.Join(u.Paths, ", ")})
	}
	rep.Protections = []report.Protection{
		{Name: "landlock", Configured: true, Detail: "ABI " + strconv.Itoa(rs.ABI)},
		{Name: "no_new_privs", Configured: true},
		{Name: "seccomp", Configured: true},
		{Name: "environment_cleared", Configured: true},
		{Name: "descriptors_closed", Configured: true},
		{Name: "subreaper", Configured: true, Detail: "setsid and double-forked descendants are found and ended with the run"},
		r.protectedReport(),
		{Name: "signal_scope", Configured: rs.Scoped},
		{Name: "network_by_port", Configured: rs.Network},
	}
	for _, n := range []string{"namespace:user", "namespace:mount", "namespace:pid", "namespace:net", "namespace:ipc", "capabilities_dropped"} {
		rep.Protections = append(rep.Protections, report.Protection{Name: n, Configured: false})
	}
	rep.Watched, rep.Copied = r.prot.Watched, heldPaths(r.prot.Held)
	rep.ProtectWalk = &r.prot.Walk
	rep.Quarantined = r.pl.Quarantined
	// No user namespace of its own: the user's inotify allowance is
	// the host's, and no ceiling of the run's can be set.
	rep.Limits = append(append(mechanism.TimeoutLimit(p), mechanism.LimitReport(r.lim, p)...), mechanism.InotifyLimits(limits.Inotify{})...)
	if n := mechanism.SampledMemoryNote(r.lim, false); n != "" {
		rep.Notes = append(rep.Notes, n)
	}
	// The plan's notes (its warnings: an unprotected built-in, an
	// incomplete walk, names not held in sandbox-run's own dirs) are this
	// run's too; its by-path note is bwrap's wording, said here for
	// Landlock.
	for _, n := range r.pl.Notes {
		if !strings.HasPrefix(n, "binds by path") {
			rep.Notes = append(rep.Notes, n)
		}
	}
	rep.Notes = append(rep.Notes, "rules by path: the shim opens each granted path as it applies the ruleset, after the plan vetted it (Landlock takes no rule by a descriptor sandbox-run opened)")
	rep.Notes = append(rep.Notes, r.nw.Notes...)
	r.report = rep
}

// spawn starts the shim with its spec on a pipe and waits for its status
// line: an error there means the command never ran.
func (r *llRun) spawn(path string, cmd []string) (*exec.Cmd, string, error) {
	specR, specW, err := os.Pipe()
	if err != nil {
		return nil, "", fault.New("cannot create a pipe", err.Error(), "check the open-file limit")
	}
	defer specR.Close()
	stR, stW, err := os.Pipe()
	if err != nil {
		specW.Close()
		return nil, "", fault.New("cannot create a pipe", err.Error(), "check the open-file limit")
	}
	defer stR.Close()
	r.spec.Path, r.spec.Argv = path, cmd
	c := exec.Command("/proc/self/exe", Arg)
	c.Args[0] = "sandbox-run"
	c.Env = []string{}
	c.Dir = r.p.Workdir
	c.Stdin, c.Stdout, c.Stderr = r.opts.Stdin, r.opts.Stdout, r.opts.Stderr
	c.ExtraFiles = []*os.File{specR, stW}
	c.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if r.setup.TTY != nil {
		// A session of its own with the terminal as its controlling one:
		// job control, ^C and ^Z reach the command's foreground group.
		c.SysProcAttr.Setctty, c.SysProcAttr.Ctty = true, 0
	}
	if os.Geteuid() == 0 {
		c.SysProcAttr.Credential = &syscall.Credential{Uid: uint32(r.uid), Gid: uint32(r.gid), Groups: []uint32{}}
	}
	err = c.Start()
	stW.Close()
	if err != nil {
		specW.Close()
		return nil, "", fault.New("cannot start sandbox-run's landlock shim", err.Error(), "run sandbox-run from a readable file")
	}
	go func() {
		json.NewEncoder(specW).Encode(r.spec)
		specW.Close()
	}()
	rd := bufio.NewReader(stR)
	line, _ := rd.ReadString('\n')
	if rest, ok := strings.CutPrefix(line, "ok "); ok {
		// The status descriptor closes on exec: its end says the shim
		// has become the command (or died), so the sampler, started
		// next, never counts the shim's own Go runtime against the
		// command's limits. Bounded, for an execve that hangs (a dead
		// network mount): the run's timeout must still reach it.
		stR.SetReadDeadline(time.Now().Add(time.Second))
		io.Copy(io.Discard, rd)
		return c, strings.TrimSpace(rest), nil
	}
	c.Process.Kill()
	c.Wait()
	why := strings.TrimSpace(strings.TrimPrefix(line, "error "))
	if why == "" {
		why = "the shim ended without a status"
	}
	return nil, "", &fault.Error{What: "cannot confine the command with Landlock", Why: why, Fix: landlockFix}
}

// Start starts the command through the shim, which confines itself
// before it becomes the command, and checks what the shim read back of
// its own thread; the sampled limits are held from then on.
func (r *llRun) Start(ctx context.Context) (mechanism.Process, error) {
	rep := &r.report
	cmd := r.cmd
	path, err := mechanism.LookPath(cmd[0], r.spec.Env)
	if err != nil {
		return mechanism.Process{}, mechanism.LookupErr(cmd[0], err)
	}
	// Orphans of the command are reparented to sandbox-run, which finds
	// and ends them; the attribute stays for the process's life.
	if err := unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0); err != nil {
		return mechanism.Process{}, fault.New("cannot become the command's subreaper", err.Error(), landlockFix)
	}
	c, readback, err := r.spawn(path, cmd)
	if err != nil {
		return mechanism.Process{}, err
	}
	pid := c.Process.Pid
	// The shim raised it before its ruleset; read back from the host.
	rep.OOMScoreAdj = mechanism.RaiseOOM(pid)
	nnp, sc, rootDenied, ok := parseReadback(readback)
	rep.Seccomp.Readback = sc
	rep.Landlock.ReadbackRootDenied = rootDenied
	rep.Landlock.ReadbackNoNewPrivs = nnp
	if !ok {
		killTree(pid)
		c.Wait()
		return mechanism.Process{}, &fault.Error{What: "Landlock did not hold", Why: "read back from the command's thread: " + readback, Fix: landlockFix}
	}
	over, err := mechanism.Sample(ctx, pid, r.lim.Sample)
	if err != nil {
		killTree(pid)
		c.Wait()
		return mechanism.Process{}, fault.New("cannot watch the command's sampled limits", err.Error(), "check that /proc is mounted and readable")
	}
	r.c = c
	return mechanism.Process{Wait: c.Wait,
		Signal: func(s os.Signal) { mechanism.SignalGroup(c.Process, s) },
		Kill:   func() { killTree(pid) },
		Over:   over,
	}, nil
}

// Finish ends every descendant the command left.
func (r *llRun) Finish(context.Context, mechanism.Ending) (mechanism.Ended, error) {
	endOrphans(r.uid)
	return mechanism.Ended{Code: mechanism.ExitStatus(r.c.ProcessState), Report: r.report}, nil
}

// killTree kills pid's process group and every confined child of
// sandbox-run.
func killTree(pid int) {
	mechanism.Kill(-pid, syscall.SIGKILL)
	mechanism.Kill(pid, syscall.SIGKILL)
}

// endOrphans ends what the command left behind: every child of
// sandbox-run (its subreaper) that runs as uid with no_new_privs and a
// seccomp filter, that is, a descendant of a landlock run. Killed ones
// reparent their own children to sandbox-run, so it repeats until none
// is left, bounded in rounds and time.
func endOrphans(uid int) {
	self := os.Getpid()
	deadline := time.Now().Add(2 * time.Second)
	for range 200 {
		pids := confinedChildren(self, uid)
		if len(pids) == 0 || time.Now().After(deadline) {
			return
		}
		for _, pid := range pids {
			mechanism.Kill(pid, syscall.SIGKILL)
		}
		for _, pid := range pids {
			var ws syscall.WaitStatus
			syscall.Wait4(pid, &ws, 0, nil)
		}
	}
}

// confinedChildren lists the children of self that run as uid with
// NoNewPrivs 1 and Seccomp 2. The children are read from each thread's
// children file (every thread of sandbox-run may have forked), not from
// a walk of every process on the host.
func confinedChildren(self, uid int) []int {
	tasks, err := os.ReadDir("/proc/" + strconv.Itoa(self) + "/task")
	if err != nil {
		return nil
	}
	var cands []string
	read := false
	for _, tk := range tasks {
		b, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(self), "task", tk.Name(), "children"))
		if err != nil {
			continue
		}
		read = true
		cands = append(cands, strings.Fields(string(b))...)
	}
	if !read {
		// A kernel without CONFIG_PROC_CHILDREN: every process is a
		// candidate, and the status decides.
		ents, _ := os.ReadDir("/proc")
		for _, e := range ents {
			cands = append(cands, e.Name())
		}
	}
	return confinedAmong(cands, self, uid)
}

// confinedAmong keeps the pids of cands that are children of self running
// as uid with NoNewPrivs 1 and Seccomp 2.
func confinedAmong(cands []string, self, uid int) []int {
	var out []int
	seen := map[int]bool{}
	for _, f := range cands {
		pid, err := strconv.Atoi(f)
		if err != nil || seen[pid] {
			continue
		}
		seen[pid] = true
		st, err := os.ReadFile(filepath.Join("/proc", f, "status"))
		if err != nil {
			continue
		}
		if ps := parseStatus(string(st)); ps.ppid == self && ps.uid == uid && ps.nnp && ps.seccomp {
			out = append(out, pid)
		}
	}
	return out
}

type procStatus struct {
	ppid, uid    int
	nnp, seccomp bool
}

func parseStatus(s string) procStatus {
	st := procStatus{ppid: -1, uid: -1}
	for _, line := range strings.Split(s, "\n") {
		k, v, _ := strings.Cut(line, ":")
		f := strings.Fields(v)
		if len(f) == 0 {
			continue
		}
		switch k {
		case "PPid":
			st.ppid, _ = strconv.Atoi(f[0])
		case "Uid":
			st.uid, _ = strconv.Atoi(f[0])
		case "NoNewPrivs":
			st.nnp = f[0] == "1"
		case "Seccomp":
			st.seccomp = f[0] == "2"
		}
	}
	return st
}
