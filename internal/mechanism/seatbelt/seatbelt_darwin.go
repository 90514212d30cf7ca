package seatbelt

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/sandbox-run/sandbox-run/internal/audit"
	"github.com/sandbox-run/sandbox-run/internal/fault"
	"github.com/sandbox-run/sandbox-run/internal/hostnet"
	"github.com/sandbox-run/sandbox-run/internal/mechanism"
	"github.com/sandbox-run/sandbox-run/internal/plan"
	"github.com/sandbox-run/sandbox-run/internal/refusals"
	"github.com/sandbox-run/sandbox-run/policy"
	"github.com/sandbox-run/sandbox-run/report"
	sbpl "github.com/sandbox-run/sandbox-run/seatbelt"
)

// The macOS tier 1 runs the command as
//
//	/usr/bin/sandbox-exec -p PROFILE -- COMMAND [ARG...]
//
// with the profile sbpl.RenderGrants makes from the run's plan (by path:
// plan.ByPath, the policy's paths resolved), a cleared
// environment (the policy's variables and the proxy's, nothing of the
// caller's), the workdir as its directory, a session of its own and, when
// sandbox-run runs as root, the policy's unprivileged uid and gid.
// sandbox-exec applies the profile to itself and execs the command, so the
// exit status and signals are the command's own.
//
// Network: macOS has no network namespace, so the profile's only network
// is connect(2) to localhost on the ports of this run's listeners: the
// built-in egress proxy (when the policy has an allow list), a relay to the
// node's egress socket (--egress-socket), and a relay to the LLM socket.
// Each listens on 127.0.0.1:PORT and, where IPv6 is up, on [::1]:PORT too,
// because the profile's "localhost" also admits ::1 and no other process
// may hold that port there.
const (
	sandboxExecPath = "/usr/bin/sandbox-exec"
	logPath         = "/usr/bin/log"
	// preflightTimeout bounds the self-test run of sandbox-exec.
	preflightTimeout = 10 * time.Second
	// logStartTimeout bounds the wait for `log stream` to start, and
	// logGrace is how long it keeps reading after the command ends: the
	// unified log delivers denials late.
	logStartTimeout = 1 * time.Second
	logGrace        = 750 * time.Millisecond
)

// sbRun is tier 1 on macOS: the policy rendered as a Seatbelt profile
// that sandbox-exec applies, the network through loopback ports that
// sandbox-run serves.
type sbRun struct {
	p        policy.Policy
	cmd      []string
	opts     mechanism.Caller
	refused  *refusals.Collector
	log      *slog.Logger
	undo     mechanism.Cleanups
	uid, gid int
	root     bool
	tmp      string // the private TMPDIR
	devDir   string
	terms    []string // inherited terminals
	nw       *hostnet.Loopback
	paths    plan.Paths // the plan's, as the kernel names them
	prof     sbpl.Profile
	env      []string
	report   report.Report
	watch    *denialWatch // the unified log's reader; nil: none
	c        *exec.Cmd    // sandbox-exec; nil before Start
}

// New returns the Seatbelt mechanism (tier 1 on macOS) for cmd under p.
func New(p policy.Policy, cmd []string, c mechanism.Config) (mechanism.Mechanism, error) {
	return &sbRun{p: p, cmd: cmd, opts: c.Caller, refused: c.Refusals, log: c.Log()}, nil
}

func (r *sbRun) Close(*mechanism.Result) { r.undo.Run() }

func (r *sbRun) AuditStart() map[string]any {
	return map[string]any{"profile_sha256": r.prof.Digest()}
}

// Probe refuses what this runner cannot hold and picks who the command
// runs as. Seatbelt takes a plan by path (the zero Layout): Seatbelt
// matches the path the kernel resolved, so the skeleton resolves every
// path of the policy (/var/folders/... as /private/var/folders/..., a
// workdir reached through a link at its target) and the profile is
// rendered from them.
func (r *sbRun) Probe(ctx context.Context) (mechanism.Host, error) {
	for _, step := range []func(context.Context) error{r.checkHost, r.ids} {
		if err := step(ctx); err != nil {
			return mechanism.Host{}, err
		}
	}
	// The profile lets the command reach localhost:PORT, which admits ::1
	// too: the port is held there as well (DualStack).
	return mechanism.Host{UID: r.uid, GID: r.gid, Root: r.root, Layout: &plan.Layout{},
		Net: hostnet.Reach{Kind: hostnet.ViaLoopback, Mechanism: "seatbelt", CheckSocket: checkSocketDarwin, DualStack: true}}, nil
}

func (r *sbRun) Prepare(ctx context.Context, pd mechanism.Planned) error {
	r.p, r.paths = pd.Policy, pd.Plan.Paths
	return r.tmpdir(ctx)
}

func (r *sbRun) Attach(ctx context.Context, s mechanism.Setup) (*report.Report, error) {
	r.nw = s.Net.Loopback
	if err := r.profile(ctx); err != nil {
		return nil, err
	}
	r.buildReport()
	return &r.report, nil
}

// checkHost refuses what this runner cannot hold: no sandbox-exec, or
// resource limits (running without them would claim less than was asked,
// silently).
func (r *sbRun) checkHost(context.Context) error {
	if fi, err := os.Stat(sandboxExecPath); err != nil || fi.IsDir() {
		why := "is a directory"
		if err != nil {
			why = seatbeltErrText(err)
		}
		return seatbeltSetupErr(sandboxExecPath+" is missing", why,
			"run on macOS, which ships it, or ask for tier 0 explicitly with --sandbox off")
	}
	p := r.p
	if p.Memory > 0 || p.Pids > 0 || p.NoFile > 0 || p.FSize > 0 || p.CPUTime > 0 {
		return seatbeltSetupErr("resource limits are not applied on macOS yet",
			"--memory, --pids, --nofile, --fsize and --cpu-time have no seatbelt implementation",
			"drop those limits on macOS, or run on Linux")
	}
	return nil
}

// ids picks the uid the command runs as (never 0).
func (r *sbRun) ids(context.Context) (err error) {
	r.uid, r.gid, r.root, err = mechanism.HostIDs(r.p)
	return err
}

// tmpdir makes the private TMPDIR (removed after the run), the sandbox's
// uid's when sandbox-run is root.
func (r *sbRun) tmpdir(context.Context) error {
	tmp, err := os.MkdirTemp("", "sandbox-run-tmp-")
	if err != nil {
		return seatbeltSetupErr("cannot create the private TMPDIR", err.Error(), "check that $TMPDIR is writable")
	}
	r.undo.Push(func() { os.RemoveAll(tmp) })
	if res, err := filepath.EvalSymlinks(tmp); err == nil {
		tmp = res
	}
	r.tmp = tmp
	if r.root {
		if err := os.Chown(tmp, r.uid, r.gid); err != nil {
			return seatbeltSetupErr("cannot hand the private TMPDIR to uid "+strconv.Itoa(r.uid), err.Error(), "check $TMPDIR")
		}
		if err := reachableForSandbox(r.p, tmp, r.uid, r.gid); err != nil {
			return err
		}
	}
	r.devDir = developerDir()
	r.terms = inheritedTerminals(r.opts.Stdin, r.opts.Stdout, r.opts.Stderr)
	r.report.RunID = r.opts.RunID
	return nil
}

// profile renders the policy as the Seatbelt profile and builds the
// command's environment.
func (r *sbRun) profile(context.Context) error {
	prof, err := sbpl.RenderGrants(grants(r.paths, r.p.Ptrace), sbpl.Options{Tag: sbpl.NewTag(), TmpDir: r.tmp, ProxyPort: int(r.nw.ProxyPort), LLMPort: int(r.nw.LLMPort),
		DeveloperDir: r.devDir, Terminals: r.terms})
	if err != nil {
		var ue *sbpl.UnsafeStringError
		if errors.As(err, &ue) {
			return &policy.InvalidError{Field: ue.Field, Reason: fmt.Sprintf("%q %s", ue.Value, ue.Reason),
				Fix: "rename the path: a Seatbelt profile cannot hold it safely"}
		}
		return err
	}
	r.prof = prof
	r.env, err = seatbeltEnv(r.p, r.nw.Env, r.tmp, r.opts.LookupEnv)
	return err
}

// buildReport says what the profile holds. Nothing here can be read back
// from inside the way /proc allows on Linux, so no protection is marked
// verified.
func (r *sbRun) buildReport() {
	p, prof, tmp := r.p, r.prof, r.tmp
	rep := report.Report{
		RunID: r.report.RunID, Tier: 1, Mechanism: "seatbelt", EnvNames: mechanism.EnvNames(r.env),
		HostUID: r.uid, HostGID: r.gid,
		Writable:   append(p.Writable(), tmp),
		ReadOnly:   p.Read,
		Network:    r.nw.Mode,
		AllowHosts: p.AllowHosts,
		Notes: []string{
			"seatbelt profile sha256 " + prof.Digest() + ", denials tagged " + prof.Tag(),
			"no PID namespace: a process that leaves the command's session (a double fork, setsid) is not ended with the run",
			"/tmp is not writable; TMPDIR is a private directory (" + tmp + "), removed after the run; its size is not capped",
		},
	}
	rep.Transparent = mechanism.TransparentLost(r.nw.Mode, mechanism.NoTransparentSeatbelt)
	for _, pr := range protected(r.paths) {
		rep.Protected = append(rep.Protected, sbpl.Canonical(pr))
	}
	rep.Notes = append(rep.Notes, r.nw.Notes...)
	rep.Notes = append(rep.Notes, seatbeltNotes(r.devDir, r.terms, r.nw.ProxyPort != 0)...)
	if p.Ptrace {
		rep.Notes = append(rep.Notes, "--ptrace: task ports of processes in this sandbox are allowed; there is no seccomp filter on macOS")
	}
	rep.Protections = []report.Protection{
		{Name: "seatbelt_profile", Configured: true, Detail: prof.Digest()},
		{Name: "protected_paths", Configured: true},
		{Name: "environment_cleared", Configured: true},
		{Name: "network_only_proxy_ports", Configured: true},
		{Name: "unprivileged_host_uid", Configured: r.uid != 0},
	}
	rep.Limits = mechanism.TimeoutLimit(p)
	r.report = rep
}

func (r *sbRun) Describe(w io.Writer) {
	fmt.Fprintf(w, "argv: %s -p PROFILE -- %s\n", sandboxExecPath, strings.Join(quoteArgs(r.cmd), " "))
	fmt.Fprintf(w, "env (values redacted): %s\n", strings.Join(r.report.EnvNames, " "))
	fmt.Fprintf(w, "profile (sha256 %s):\n%s", r.prof.Digest(), r.prof)
}

// Start starts the command under sandbox-exec, once a preflight has shown
// that the profile compiles and applies, in a session of its own.
func (r *sbRun) Start(ctx context.Context) (mechanism.Process, error) {
	cmd := r.cmd
	name := cmd[0]
	if strings.Contains(name, "/") && !filepath.IsAbs(name) {
		name = filepath.Join(r.p.Workdir, name)
	}
	path, err := mechanism.LookPath(name, r.env)
	if err != nil {
		return mechanism.Process{}, mechanism.LookupErr(cmd[0], err)
	}
	args := append([]string{sandboxExecPath, "-p", r.prof.String(), "--", path}, cmd[1:]...)
	cred := (*syscall.Credential)(nil)
	if r.root {
		cred = &syscall.Credential{Uid: uint32(r.uid), Gid: uint32(r.gid), Groups: []uint32{}}
	}
	markInheritedCloexec()
	if err := seatbeltPreflight(ctx, r.prof, r.p.Workdir, cred); err != nil {
		return mechanism.Process{}, err
	}
	r.watch = r.watchDenials(&r.report)
	r.log.Debug("starting sandbox-exec", "command", path, "profile_sha256", r.prof.Digest())
	c, err := startSeatbelt(args, r.env, r.p.Workdir, cred, r.opts)
	if err != nil {
		r.stopWatch()
		return mechanism.Process{}, err
	}
	r.c = c
	return mechanism.Process{Wait: c.Wait,
		Signal: func(s os.Signal) { mechanism.SignalGroup(c.Process, s) },
		Kill:   func() { mechanism.KillGroup(c.Process) },
	}, nil
}

// Finish ends what the command left in its session's group and stops
// reading denials back.
func (r *sbRun) Finish(context.Context, mechanism.Ending) (mechanism.Ended, error) {
	mechanism.KillGroup(r.c.Process)
	r.stopWatch()
	return mechanism.Ended{Code: mechanism.ExitStatus(r.c.ProcessState), Report: r.report}, nil
}

// stopWatch stops the denial watch, if any, noting what it filtered.
func (r *sbRun) stopWatch() {
	if r.watch == nil {
		return
	}
	st := r.watch.stop(logGrace)
	r.watch = nil
	if st.Noise > 0 {
		r.report.Notes = append(r.report.Notes, fmt.Sprintf("%d denials of known noise (libSystem's logging and analytics clients) not written to the audit log", st.Noise))
	}
}

// watchDenials reads the profile's denials back from the unified log into
// the audit log, when there is one, and notes in rep how far that goes.
func (r *sbRun) watchDenials(rep *report.Report) *denialWatch {
	aw := r.opts.Audit
	if aw == nil {
		return nil
	}
	runID := rep.RunID
	watch, started, err := startDenialWatch(r.prof.Tag(), func(d sbpl.Denial) {
		audit.Event(aw, runID, "seatbelt_deny", map[string]any{"operation": d.Operation, "target": d.Target,
			"process": d.Process, "pid": d.PID, "log_time": d.Time})
	})
	switch {
	case err != nil:
		rep.Notes = append(rep.Notes, "denials not read back from the unified log: "+err.Error())
		r.log.Warn("seatbelt denial log unavailable", "err", err)
	case !started:
		rep.Notes = append(rep.Notes, "denials read back from the unified log into the audit log, but "+logPath+
			" stream had not confirmed it was streaming when the command started: early denials may be missing")
	default:
		rep.Notes = append(rep.Notes, "denials read back from the unified log into the audit log (best effort: the log is lossy and late)")
	}
	return watch
}

// seatbeltEnv is the command's environment: commandEnv's, with TMPDIR
// at the private directory unless the policy sets it, and clang's module
// cache in it unless the environment names one.
func seatbeltEnv(p policy.Policy, extra map[string]string, tmp string, lookup func(string) (string, bool)) ([]string, error) {
	env, err := mechanism.CommandEnv(p, extra, lookup)
	if err != nil {
		return nil, err
	}
	if _, set := p.Env["TMPDIR"]; !set {
		for i, kv := range env {
			if strings.HasPrefix(kv, "TMPDIR=") {
				env[i] = "TMPDIR=" + tmp
			}
		}
	}
	// clang (and swiftc) keep their module cache under the user's
	// ~/Library/Caches, which the profile does not open; the private
	// TMPDIR is writable and goes with the run.
	if !slices.ContainsFunc(env, func(kv string) bool { return strings.HasPrefix(kv, "CLANG_MODULE_CACHE_PATH=") }) {
		env = append(env, "CLANG_MODULE_CACHE_PATH="+filepath.Join(tmp, "clang-module-cache"))
	}
	return env, nil
}

// seatbeltNotes are the report's notes on what issue 22 opened: the
// developer directory, the inherited terminals, and trustd.
func seatbeltNotes(devDir string, terminals []string, proxy bool) []string {
	var notes []string
	if devDir != "" {
		notes = append(notes, "developer directory (xcode-select) readable: "+devDir)
	}
	if len(terminals) > 0 {
		notes = append(notes, "inherited terminal open to ioctl (isatty, raw mode): "+strings.Join(terminals, ", ")+
			"; the command has no controlling terminal (new session), so TIOCSTI is refused by the kernel")
	}
	if proxy {
		notes = append(notes, "TLS verification reaches trustd, which fetches OCSP responses and CRLs itself, outside the egress proxy")
	}
	return notes
}

// startSeatbelt starts sandbox-exec in a session of its own.
func startSeatbelt(args, env []string, dir string, cred *syscall.Credential, opts mechanism.Caller) (*exec.Cmd, error) {
	c := &exec.Cmd{Path: args[0], Args: args, Env: env, Dir: dir}
	// *os.File values are handed over as they are; nil is /dev/null. No
	// other descriptor is inherited: Go opens everything close-on-exec, and
	// markInheritedCloexec has marked what sandbox-run itself inherited.
	if opts.Stdin != nil {
		c.Stdin = opts.Stdin
	}
	if opts.Stdout != nil {
		c.Stdout = opts.Stdout
	}
	if opts.Stderr != nil {
		c.Stderr = opts.Stderr
	}
	c.SysProcAttr = &syscall.SysProcAttr{Setsid: true, Credential: cred}
	if err := c.Start(); err != nil {
		return nil, seatbeltSetupErr("cannot start "+sandboxExecPath, err.Error(), "check that it is executable")
	}
	return c, nil
}

// seatbeltPreflight runs /usr/bin/true under the profile: sandbox-exec
// reports a profile it cannot compile or apply only by its exit status and
// stderr, which in the real run would be mistaken for the command's.
func seatbeltPreflight(ctx context.Context, prof sbpl.Profile, dir string, cred *syscall.Credential) error {
	ctx, cancel := context.WithTimeout(ctx, preflightTimeout)
	defer cancel()
	var stderr bytes.Buffer
	c := exec.CommandContext(ctx, sandboxExecPath, "-p", prof.String(), "--", "/usr/bin/true")
	c.Env = []string{}
	c.Dir = dir
	c.Stderr = &limitedWriter{w: &stderr, n: 4096}
	c.SysProcAttr = &syscall.SysProcAttr{Setsid: true, Credential: cred}
	if err := c.Run(); err != nil {
		why := strings.TrimSpace(stderr.String())
		if why == "" {
			why = err.Error()
		}
		return seatbeltSetupErr("sandbox-exec refused the profile", why,
			"report this as a bug in sandbox-run with the profile from --dry-run and the macOS version (sw_vers)")
	}
	return nil
}

// checkSocketDarwin fails closed when a socket the run depends on is
// missing, not a socket or refusing.
func checkSocketDarwin(flag, path, fix string) error {
	fi, err := os.Stat(path)
	if err != nil {
		return seatbeltSetupErr(flag+" "+path, "does not exist ("+seatbeltErrText(err)+")", fix)
	}
	if fi.Mode().Type() != fs.ModeSocket {
		return seatbeltSetupErr(flag+" "+path, "is not a Unix socket", fix)
	}
	c, err := net.DialTimeout("unix", path, 2*time.Second)
	if err != nil {
		return seatbeltSetupErr(flag+" "+path, "refuses connections ("+seatbeltErrText(err)+")", fix)
	}
	c.Close()
	return nil
}

// denialWatch streams the unified log for one run's tag.
type denialWatch struct {
	cmd   *exec.Cmd
	watch *sbpl.Watch
}

// startDenialWatch starts `log stream` for tag and waits, up to
// logStartTimeout, for its banner ("Filtering the log data ...") so that
// denials of a command started afterwards are seen. An error printed
// instead of the banner ("Must be admin ...") or an exit before it is an
// error; started is false when neither the banner nor an error came in
// time, and the stream keeps running. Each denial is passed to fn.
func startDenialWatch(tag string, fn func(sbpl.Denial)) (w *denialWatch, started bool, err error) {
	args, err := sbpl.LogStreamArgs(tag)
	if err != nil {
		return nil, false, err
	}
	c := exec.Command(logPath, args...)
	c.Env = []string{}
	out, err := c.StdoutPipe()
	if err != nil {
		return nil, false, err
	}
	errOut, err := c.StderrPipe()
	if err != nil {
		return nil, false, err
	}
	if err := c.Start(); err != nil {
		return nil, false, err
	}
	w = &denialWatch{cmd: c, watch: sbpl.WatchStream(out, errOut, tag, fn)}
	started, err = w.watch.WaitStart(logStartTimeout)
	if err != nil {
		w.end()
		return nil, false, err
	}
	return w, started, nil
}

// stop lets the stream run for grace more, ends it and waits until every
// line it printed has been read. It returns what the stream held.
func (w *denialWatch) stop(grace time.Duration) sbpl.StreamStats {
	time.Sleep(grace)
	w.end()
	st, _ := w.watch.Stats()
	return st
}

func (w *denialWatch) end() {
	w.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-w.watch.Done():
	case <-time.After(2 * time.Second):
		w.cmd.Process.Kill()
		<-w.watch.Done()
	}
	w.cmd.Wait() // after every read: StdoutPipe's rule
}

// reachableForSandbox checks, when sandbox-run is root, that the uid the
// command runs as can reach the private TMPDIR, the workdir and the
// --write directories (search on every parent, write on the directory)
// and the --read paths that exist.
func reachableForSandbox(p policy.Policy, tmp string, uid, gid int) error {
	for _, w := range append(p.Writable(), tmp) {
		if err := reachableAs(w, uid, gid, true, statOwner); err != nil {
			if w == tmp {
				var se *fault.Error
				if errors.As(err, &se) {
					se.Fix = "run with TMPDIR=/private/tmp (a launchd TMPDIR is its owner's alone), or " + se.Fix
				}
			}
			return err
		}
	}
	for _, r := range p.Read {
		if _, err := os.Lstat(r); err != nil {
			continue
		}
		if err := reachableAs(r, uid, gid, false, statOwner); err != nil {
			return err
		}
	}
	return nil
}

// developerDir resolves xcode-select's choice (the link
// /private/var/db/xcode_select_link) to the directory it names, such as
// /Applications/Xcode_16.2.app/Contents/Developer on GitHub's runners. ""
// when there is none or it does not resolve to a directory: then only the
// Command Line Tools are readable.
func developerDir() string {
	d, err := filepath.EvalSymlinks("/private/var/db/xcode_select_link")
	if err != nil || !filepath.IsAbs(d) {
		return ""
	}
	if fi, err := os.Stat(d); err != nil || !fi.IsDir() {
		return ""
	}
	return d
}

// inheritedTerminals returns the device paths of the terminals among the
// command's standard streams: pseudo-terminals, named /dev/ttysNNN after
// their minor number, checked against the device that path names.
func inheritedTerminals(files ...*os.File) []string {
	var out []string
	for _, f := range files {
		if f == nil {
			continue
		}
		var st syscall.Stat_t
		if err := syscall.Fstat(int(f.Fd()), &st); err != nil || st.Mode&syscall.S_IFMT != syscall.S_IFCHR {
			continue
		}
		name := fmt.Sprintf("/dev/ttys%03d", uint32(st.Rdev)&0xffffff)
		var named syscall.Stat_t
		if err := syscall.Stat(name, &named); err != nil || named.Rdev != st.Rdev {
			continue
		}
		if !slices.Contains(out, name) {
			out = append(out, name)
		}
	}
	return out
}

// markInheritedCloexec sets close-on-exec on every descriptor above 2.
// Go opens its own descriptors close-on-exec, but not the ones sandbox-run
// inherited from its caller, and those would otherwise pass through
// sandbox-exec to the command, which could read a file the profile denies
// through them (the escape matrix's fs-read-inherited-fd).
func markInheritedCloexec() {
	if ents, err := os.ReadDir("/dev/fd"); err == nil {
		for _, e := range ents {
			if fd, err := strconv.Atoi(e.Name()); err == nil && fd > 2 {
				syscall.CloseOnExec(fd)
			}
		}
		return
	}
	var lim syscall.Rlimit
	n := 4096
	if syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim) == nil && lim.Cur < uint64(n) {
		n = int(lim.Cur)
	}
	for fd := 3; fd < n; fd++ {
		syscall.CloseOnExec(fd)
	}
}

// limitedWriter keeps the first n bytes written to it and drops the rest.
type limitedWriter struct {
	w io.Writer
	n int
}

func (l *limitedWriter) Write(b []byte) (int, error) {
	if l.n > 0 {
		k := min(len(b), l.n)
		l.w.Write(b[:k])
		l.n -= k
	}
	return len(b), nil
}

func quoteArgs(a []string) []string {
	out := make([]string, len(a))
	for i, s := range a {
		out[i] = strconv.Quote(s)
	}
	return out
}

// seatbeltSetupErr and seatbeltErrText are this file's own copies of the
// Linux helpers, so that the darwin build never depends on where those live.
func seatbeltSetupErr(what, why, fix string) error {
	return &fault.Error{What: what, Why: why, Fix: fix}
}

func seatbeltErrText(err error) string {
	if err == nil {
		return "no error"
	}
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return pe.Err.Error()
	}
	return err.Error()
}
