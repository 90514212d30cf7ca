//go:build linux || darwin

package matrix

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"golang.org/x/sys/unix"

	"github.com/sandbox-run/sandbox-run/internal/probe"
	"github.com/sandbox-run/sandbox-run/policy"
	"github.com/sandbox-run/sandbox-run/proxy"
)

// RunOptions say how to run the matrix.
type RunOptions struct {
	// Binary is the sandbox-run binary whose sandbox is tested; empty means
	// this process's own executable.
	Binary string
	// Mechanism is the column tested: this platform's own (bwrap on
	// Linux, seatbelt on macOS; the default), "landlock" (Linux, each
	// attempt runs with --sandbox landlock), "gvisor" (--sandbox gvisor,
	// tier 2 on Linux) or "none" (each attempt runs with --sandbox off, to
	// check tier 0's expectations).
	Mechanism string
	// Image, with Mechanism "gvisor", runs each confined attempt with
	// --image Image (that container image's tree as the root, from
	// podman's storage) instead of the host's.
	Image string
	// Filter selects the cases to run; nil runs all.
	Filter func(Case) bool
	// Parallel bounds the cases run at once; 0 means 6.
	Parallel int
	// CaseTimeout bounds each run of a probe; 0 means 20s.
	CaseTimeout time.Duration
}

// Run runs cases against the sandbox of opts.Binary and returns one result
// per case, in the order given. It sets up every canary first and removes
// everything it made before it returns. The error is non-nil only when the
// canaries themselves could not be set up.
func Run(ctx context.Context, cases []Case, opts RunOptions) ([]Result, error) {
	if opts.Mechanism == "" {
		opts.Mechanism = nativeMechanism
	}
	if opts.Parallel <= 0 {
		opts.Parallel = 6
	}
	if opts.CaseTimeout <= 0 {
		opts.CaseTimeout = 20 * time.Second
	}
	if opts.Binary == "" {
		exe, err := os.Executable()
		if err != nil {
			return nil, fmt.Errorf("check: cannot find sandbox-run's own binary: %w", err)
		}
		opts.Binary = exe
	}
	fx, err := newFixture(ctx, opts.Binary)
	if err != nil {
		return nil, err
	}
	defer fx.close()

	results := make([]Result, len(cases))
	sem := make(chan struct{}, opts.Parallel)
	var wg sync.WaitGroup
	for i, c := range cases {
		if opts.Filter != nil && !opts.Filter(c) {
			results[i] = Result{ID: c.ID, Group: c.Group, Tries: c.Tries, Verdict: "", Expected: c.Expected(opts.Mechanism, runtime.GOOS),
				ExpectedWhy: c.Reason(opts.Mechanism, runtime.GOOS)}
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			sem <- struct{}{}
			defer func() { <-sem }()
			start := time.Now()
			r := fx.runCase(ctx, c, opts)
			r.ID, r.Group, r.Tries = c.ID, c.Group, c.Tries
			r.Expected = c.Expected(opts.Mechanism, runtime.GOOS)
			r.ExpectedWhy = c.Reason(opts.Mechanism, runtime.GOOS)
			r.DurationMS = time.Since(start).Milliseconds()
			results[i] = r
		}()
	}
	wg.Wait()
	out := results[:0]
	for _, r := range results {
		if r.Verdict != "" {
			out = append(out, r)
		}
	}
	return out, nil
}

// fixture is everything the cases share: a private tree under /tmp, a
// copy of the binary the sandbox can see, the flag, the canaries and the
// marker process.
type fixture struct {
	base, bin, binDir, outside, flag, token string
	// tmp is the TMPDIR of the runs the matrix kills (launch "sigkill"):
	// such a run leaves its runtime directory behind until the next run
	// of its mechanism sweeps it, and here the fixture's cleanup does.
	tmp string
	// cache is the confined runs' XDG_CACHE_HOME: what they quarantine
	// (the cases plant protected files), their journals and bwrap's
	// detection go there and are removed with the fixture, so that check
	// leaves nothing in the caller's own quarantine.
	cache      string
	uid, gid   int
	root       bool
	can        *canaries
	vars       map[string]string
	marker     *exec.Cmd
	markerIn   io.Closer
	markerDone chan struct{}
	// osCleanup undoes what osCanaries made outside the fixture's tree.
	osCleanup func()
}

func newToken() string {
	b := make([]byte, 8)
	rand.Read(b)
	return hex.EncodeToString(b)
}

func newFixture(ctx context.Context, binary string) (_ *fixture, err error) {
	fx := &fixture{token: "FLAG-" + newToken(), root: os.Geteuid() == 0, can: &canaries{}}
	fx.uid, fx.gid = os.Getuid(), os.Getgid()
	if fx.root {
		fx.uid, fx.gid = policy.DefaultUID, policy.DefaultGID
	}
	defer func() {
		if err != nil {
			fx.close()
		}
	}()
	fail := func(what string, err error) error {
		return fmt.Errorf("check: cannot set up the escape matrix: %s: %w", what, err)
	}
	// The pid in the name lets a test tell its own leftovers from those of
	// another run going on at the same time.
	if fx.base, err = os.MkdirTemp("/tmp", fmt.Sprintf("sbx-check-%d-", os.Getpid())); err != nil {
		return nil, fail("a directory under /tmp", err)
	}
	fx.base = resolvedDir(fx.base)
	os.Chmod(fx.base, 0o755)
	// The probe binary, where the sandbox's uid can read it and no
	// sandbox can write it.
	fx.binDir = filepath.Join(fx.base, "bin")
	fx.bin = filepath.Join(fx.binDir, "sandbox-run")
	if err := os.Mkdir(fx.binDir, 0o755); err != nil {
		return nil, fail("bin dir", err)
	}
	if err := copyFile(binary, fx.bin); err != nil {
		return nil, fail("copying "+binary, err)
	}
	fx.outside = filepath.Join(fx.base, "outside")
	fx.flag = filepath.Join(fx.outside, "flag")
	fx.tmp = filepath.Join(fx.base, "tmp")
	fx.cache = filepath.Join(fx.base, "cache")
	for _, d := range []string{fx.outside, fx.tmp, fx.cache, filepath.Join(fx.base, "cases"), filepath.Join(fx.base, "sock"), filepath.Join(fx.base, "px")} {
		if err := os.Mkdir(d, 0o755); err != nil {
			return nil, fail(d, err)
		}
	}
	if err := os.WriteFile(fx.flag, []byte(fx.token+"\n"), 0o644); err != nil {
		return nil, fail("flag", err)
	}
	// The flag and its directory belong to the sandbox's uid, so that the
	// controls (hard link, write beside) are the same uid's rights.
	fx.chown(fx.outside)
	fx.chown(fx.flag)

	v := map[string]string{
		"flag": fx.flag, "token": fx.token, "outside": fx.outside,
		"flag_rel":    "../../../outside/flag",
		"flag_dslash": "/" + strings.ReplaceAll(fx.flag, "/", "//"),
		"sysctl":      "/proc/sys/vm/overcommit_ratio",
	}
	fx.osCleanup = osCanaries(fx, v)
	if err := fx.can.start(fx.base, v); err != nil {
		return nil, fmt.Errorf("check: cannot set up the escape matrix: %w", err)
	}
	if err := fx.startMarker(ctx, v); err != nil {
		return nil, fail("marker process", err)
	}
	fx.vars = v
	return fx, nil
}

// start serves the canaries the cases aim at (TCP on every address, UDP,
// a DNS server, Unix and abstract sockets, a redirector on the host's
// own address) and names their addresses in v. An error is "what: cause".
func (c *canaries) start(base string, v map[string]string) error {
	var err error
	if c.tcp, err = net.Listen("tcp", ":0"); err != nil {
		return fmt.Errorf("the TCP canary: %w", err)
	}
	c.serveStream(c.tcp)
	port := strconv.Itoa(c.tcp.Addr().(*net.TCPAddr).Port)
	v["tcp_port"], v["tcp4"], v["tcp6"] = port, "127.0.0.1:"+port, "[::1]:"+port
	hostIP := hostAddress()
	if hostIP != "" {
		v["tcp_host"] = net.JoinHostPort(hostIP, port)
	}
	if c.udp, err = net.ListenPacket("udp4", "127.0.0.1:0"); err != nil {
		return fmt.Errorf("the UDP canary: %w", err)
	}
	c.serveUDP()
	v["udp4"] = c.udp.LocalAddr().String()
	dconn, err := net.ListenPacket("udp4", "127.0.0.1:0")
	if err != nil {
		return fmt.Errorf("the DNS canary: %w", err)
	}
	c.dns = &dnsCanary{conn: dconn}
	c.dns.serve(&c.wg)
	v["dns"] = dconn.LocalAddr().String()
	sock := filepath.Join(base, "sock", "canary.sock")
	if c.unix, err = net.Listen("unix", sock); err != nil {
		return fmt.Errorf("the Unix socket canary: %w", err)
	}
	os.Chmod(sock, 0o777)
	c.serveStream(c.unix)
	v["unix"] = sock
	if hasAbstractSockets {
		abstract := "@sbx-check-" + newToken()
		if c.abstract, err = net.Listen("unix", abstract); err != nil {
			return fmt.Errorf("the abstract socket canary: %w", err)
		}
		c.serveStream(c.abstract)
		v["abstract"] = abstract
	}
	if hostIP != "" {
		if ln, err := net.Listen("tcp", net.JoinHostPort(hostIP, "0")); err == nil {
			c.redirector = newRedirector(ln, "http://127.0.0.1:"+port+"/", &c.wg)
			v["redirector"] = ln.Addr().String()
			v["redirector_url"] = "http://" + ln.Addr().String() + "/redirect"
		}
	}
	return nil
}

func (fx *fixture) chown(p string) {
	if fx.root {
		os.Lchown(p, fx.uid, fx.gid)
	}
}

// startMarker starts a process of the sandbox's uid outside any sandbox:
// the target of the same-uid attempts. Its environment holds a secret.
func (fx *fixture) startMarker(ctx context.Context, v map[string]string) error {
	tag, secret := "marker-"+newToken(), "SECRET-"+newToken()
	cmd := exec.Command(fx.bin, probe.Arg, "marker", tag)
	cmd.Env = []string{"SBX_MARKER_SECRET=" + secret}
	cmd.Dir = fx.outside
	cmd.SysProcAttr = fx.sysProcAttr("", nil)
	in, err := cmd.StdinPipe()
	if err != nil {
		return err
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		return err
	}
	if err := cmd.Start(); err != nil {
		return err
	}
	fx.marker, fx.markerIn, fx.markerDone = cmd, in, make(chan struct{})
	go func() { cmd.Wait(); close(fx.markerDone) }()
	line := make(chan string, 1)
	go func() { l, _ := bufio.NewReader(out).ReadString('\n'); line <- l }()
	select {
	case l := <-line:
		if l != "ready\n" {
			return fmt.Errorf("marker said %q", l)
		}
	case <-time.After(10 * time.Second):
		return errors.New("marker not ready after 10s")
	}
	v["marker_pid"] = strconv.Itoa(cmd.Process.Pid)
	v["marker_tag"], v["marker_secret"], v["marker_key"] = tag, secret, "sbx-check-"+tag
	return nil
}

func (fx *fixture) close() {
	if fx.marker != nil {
		fx.markerIn.Close()
		select {
		case <-fx.markerDone:
		case <-time.After(5 * time.Second):
			fx.marker.Process.Kill()
			<-fx.markerDone
		}
	}
	fx.can.close()
	if fx.osCleanup != nil {
		fx.osCleanup()
	}
	if fx.base != "" {
		os.RemoveAll(fx.base)
	}
}

// hostAddress is the host's first global IPv4 address on an interface
// that is up, or "".
func hostAddress() string {
	ifs, err := net.Interfaces()
	if err != nil {
		return ""
	}
	for _, ifc := range ifs {
		if ifc.Flags&net.FlagUp == 0 || ifc.Flags&net.FlagLoopback != 0 {
			continue
		}
		addrs, _ := ifc.Addrs()
		for _, a := range addrs {
			if n, ok := a.(*net.IPNet); ok && n.IP.To4() != nil && n.IP.IsGlobalUnicast() {
				return n.IP.String()
			}
		}
	}
	return ""
}

func copyFile(src, dst string) error {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.OpenFile(dst, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o755)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return err
	}
	return out.Close()
}

// mechanismArgs are the run flags of the column opts tests.
func mechanismArgs(opts RunOptions) []string {
	switch opts.Mechanism {
	case "none":
		return []string{"--sandbox", "off"}
	case "gvisor":
		if opts.Image != "" {
			return []string{"--sandbox", "gvisor", "--image", opts.Image}
		}
		return []string{"--sandbox", "gvisor"}
	case "landlock":
		return []string{"--sandbox", "landlock"}
	}
	return nil
}

// runCase runs one case: n/a checks, the positive control, the confined
// attempt, the comparison. The confined side runs only when the control
// reached at least one canary unconfined: otherwise a block would prove
// nothing, and the case is untested.
func (fx *fixture) runCase(ctx context.Context, c Case, opts RunOptions) Result {
	if r, na := fx.notApplicable(c, opts); na {
		return r
	}
	dir := filepath.Join(fx.base, "cases", c.ID)
	if err := os.Mkdir(dir, 0o755); err != nil {
		return errResult("case dir", err)
	}
	runs := map[string]probeRun{}
	for _, side := range []string{"control", "confined"} {
		pr, fail := fx.runSide(ctx, c, opts, side, filepath.Join(dir, side), runs["control"].lines)
		if fail != nil {
			return *fail
		}
		runs[side] = pr
		if side == "control" && !slices.ContainsFunc(pr.order, func(n string) bool { return pr.subs[n] }) {
			return Result{Verdict: Untested, Reason: "the control did not reach the canary unconfined here: " + controlWhy(pr), Control: pr.lines}
		}
	}
	v, why, untested := classify(runs["control"], runs["confined"])
	r := Result{Verdict: v, Reason: why, Control: runs["control"].lines, Confined: runs["confined"].lines}
	if v == Held {
		r.UntestedAttempts = untested
	}
	return r
}

// notApplicable returns the n/a result, and true, when c does not apply to
// this mechanism, OS, architecture or user; such a case is never run.
func (fx *fixture) notApplicable(c Case, opts RunOptions) (Result, bool) {
	switch {
	case c.Expected(opts.Mechanism, runtime.GOOS) == ExpectNA:
		reason := fmt.Sprintf("does not apply to %s on %s", opts.Mechanism, runtime.GOOS)
		if why := c.Reason(opts.Mechanism, runtime.GOOS); why != "" {
			reason += ": " + why
		}
		return Result{Verdict: NA, Reason: reason}, true
	case len(c.Arch) > 0 && !slices.Contains(c.Arch, runtime.GOARCH):
		return Result{Verdict: NA, Reason: "only on " + strings.Join(c.Arch, ", ")}, true
	case slices.Contains(c.Requires, "root") && !fx.root:
		return Result{Verdict: NA, Reason: "only when sandbox-run runs as root (this attempt targets root's own hole)"}, true
	}
	return Result{}, false
}

// runSide runs one side of c (control or confined) in the fresh workdir w
// with its own canary names, and judges what it reached. fail is the
// case's result when the side could not be run or judged; control is the
// control's output, kept in that result.
func (fx *fixture) runSide(ctx context.Context, c Case, opts RunOptions, side, w string, control []string) (pr probeRun, fail *Result) {
	if err := fx.workdir(w, c.Setup); err != nil {
		return pr, resultOf(errResult("workdir", err))
	}
	vars := fx.caseVars()
	caseArgs, err := expandAll(c.Args, vars)
	if err != nil {
		return pr, resultOf(canaryMissing(err))
	}
	args := append([]string{probe.Arg, c.Probe}, caseArgs...)
	argv := controlArgv(c, fx.bin, w, args)
	if side != "control" {
		var stop func()
		argv, stop, fail = fx.confinedArgv(ctx, c, opts, w, args, vars)
		if fail != nil {
			return pr, fail
		}
		if stop != nil {
			defer stop()
		}
	}
	pr, err = fx.launch(ctx, c, side, w, argv, vars, opts.CaseTimeout)
	var nc *noCanaryError
	if errors.As(err, &nc) {
		return pr, &Result{Verdict: Untested, Reason: side + ": " + nc.Error(), Control: control}
	}
	if err != nil {
		return pr, resultOf(errResult(side+" run", err))
	}
	pr = fx.judge(c, pr, vars, side == "control")
	if pr.verdict == "" {
		return pr, &Result{Verdict: Untested, Error: true, Reason: side + ": the probe printed no verdict: " + strings.Join(pr.lines, " | "),
			Control: control, Confined: pr.lines}
	}
	return pr, nil
}

// caseVars are the canary names of one side of a case: fresh per side, so
// that what the control left cannot count for the confined attempt, and
// pid-tagged so that concurrent matrices do not share them.
func (fx *fixture) caseVars() map[string]string {
	vars := map[string]string{"survivor_tag": fmt.Sprintf("survivor-%d-%s", os.Getpid(), newToken()), "exfil_name": "x" + newToken() + ".exfil.test",
		"written": filepath.Join(fx.outside, "written-"+newToken()), "launchd_label": fmt.Sprintf("sbx-check-%d-%s", os.Getpid(), newToken())}
	for k, v := range fx.vars {
		vars[k] = v
	}
	return vars
}

// expandAll expands every template in list with vars; the error names the
// first canary that is missing.
func expandAll(list []string, vars map[string]string) ([]string, error) {
	var out []string
	for _, a := range list {
		s, err := expand(a, vars)
		if err != nil {
			return nil, err
		}
		out = append(out, s)
	}
	return out, nil
}

// canaryMissing is the untested result of a case whose template names a
// canary this fixture does not have.
func canaryMissing(err error) Result {
	return Result{Verdict: Untested, Reason: "canary missing: " + err.Error()}
}

// resultOf is r as a case's early result.
func resultOf(r Result) *Result { return &r }

// controlArgv runs the probe (bin with args) unconfined. A "sigkill" case
// kills what it launched, and that must be sandbox-run itself, at tier 0.
func controlArgv(c Case, bin, w string, args []string) []string {
	if c.Launch == "sigkill" {
		return append([]string{bin, "run", "--sandbox", "off", "--workdir", w, "--", bin}, args...)
	}
	return append([]string{bin}, args...)
}

// confinedArgv runs the probe under the column's mechanism in w, with the
// case's network: its allowed hosts, or a node proxy's socket, which stop
// ends once the run is judged. fail is the case's result when the proxy
// cannot start or an allowed host names a missing canary.
func (fx *fixture) confinedArgv(ctx context.Context, c Case, opts RunOptions, w string, args []string, vars map[string]string) (argv []string, stop func(), fail *Result) {
	argv = append([]string{fx.bin, "run", "--workdir", w, "--read", fx.binDir}, mechanismArgs(opts)...)
	switch c.Network {
	case "proxy":
		hosts, err := expandAll(c.Allow, vars)
		if err != nil {
			return nil, nil, resultOf(canaryMissing(err))
		}
		for _, h := range hosts {
			argv = append(argv, "--allow-host", h)
		}
	case "node-proxy":
		sock, stopProxy, err := fx.nodeProxy(ctx, c, vars)
		if err != nil {
			return nil, nil, resultOf(errResult("node proxy", err))
		}
		stop = stopProxy
		argv = append(argv, "--egress-socket", sock)
	}
	argv = append(argv, "--", fx.bin)
	return append(argv, args...), stop, nil
}

// judge records, for the cases judged on the host rather than by the
// probe's own verdict, which attempts reached their canary. Others pass
// through unchanged.
func (fx *fixture) judge(c Case, pr probeRun, vars map[string]string, control bool) probeRun {
	switch c.Judge {
	case "survivor":
		return judgeSurvivors(pr, vars["survivor_tag"], control)
	case "host-file", "host-file-late":
		return judgeHostFile(pr, vars, c.Judge == "host-file-late")
	case "pasteboard":
		return judgePasteboard(pr, vars["exfil_name"])
	case "port-canary":
		// Judged in launchPortCanary, by what the canary received.
	case "dns-log":
		seen := fx.can.dns.asked(vars["exfil_name"])
		pr.subs = map[string]bool{"dns": seen}
		pr.order = []string{"dns"}
		pr.details = map[string]string{"dns": fmt.Sprintf("DNS canary asked for %s: %v", vars["exfil_name"], seen)}
		pr.verdict = "judged"
	}
	return pr
}

// judgeHostFile says whether the file vars["written"] exists on the host
// after the run, and removes it. late waits up to hostFileWait for it: the
// case's writer may outlive the run.
func judgeHostFile(pr probeRun, vars map[string]string, late bool) probeRun {
	_, err := os.Lstat(vars["written"])
	for deadline := time.Now().Add(hostFileWait); err != nil && late && time.Now().Before(deadline); {
		time.Sleep(100 * time.Millisecond)
		_, err = os.Lstat(vars["written"])
	}
	afterCase(vars)
	pr.subs = map[string]bool{"host-file": err == nil}
	pr.order = []string{"host-file"}
	pr.details = map[string]string{"host-file": fmt.Sprintf("%s on the host after the run: %v", vars["written"], err == nil)}
	os.Remove(vars["written"])
	return pr
}

// judgePasteboard says whether the host's pasteboard holds name. When it
// cannot be read the run has no verdict, and the case is untested.
func judgePasteboard(pr probeRun, name string) probeRun {
	has, err := pasteboardHas(name)
	if err != nil {
		pr.verdict = ""
		pr.lines = append(pr.lines, "pasteboard not judged: "+err.Error())
		return pr
	}
	pr.subs = map[string]bool{"pasteboard": has}
	pr.order = []string{"pasteboard"}
	pr.details = map[string]string{"pasteboard": fmt.Sprintf("the host's pasteboard holds %s: %v", name, has)}
	return pr
}

func controlWhy(pr probeRun) string {
	var s []string
	for _, n := range pr.order {
		s = append(s, n+": "+pr.details[n])
	}
	return strings.Join(s, "; ")
}

func errResult(what string, err error) Result {
	return Result{Verdict: Untested, Error: true, Reason: what + ": " + probe.OneLine(err.Error())}
}

// workdir makes a workdir owned by the sandbox's uid with the case's
// fixtures in it.
func (fx *fixture) workdir(w string, setup []string) error {
	if err := os.Mkdir(w, 0o755); err != nil {
		return err
	}
	var mk []string
	for _, s := range setup {
		switch s {
		case "protected-present":
			for _, d := range []string{".git/hooks", ".vscode", ".idea", ".claude"} {
				os.MkdirAll(filepath.Join(w, d), 0o755)
			}
			for _, f := range []string{".git/config", ".gitmodules", ".mcp.json", ".bashrc", ".bash_profile", ".profile", ".zshrc"} {
				mk = append(mk, filepath.Join(w, f))
			}
		case "git-present":
			// A repository as git makes one: hooks/ is there (a missing one
			// is writable while the run lasts, then quarantined).
			for _, d := range []string{".git/objects", ".git/refs", ".git/hooks"} {
				os.MkdirAll(filepath.Join(w, d), 0o755)
			}
			mk = append(mk, filepath.Join(w, ".git/HEAD"))
		case "flag-link":
			if err := os.Symlink(fx.flag, filepath.Join(w, "flaglink")); err != nil {
				return err
			}
		}
	}
	for _, f := range mk {
		if err := os.WriteFile(f, []byte("original\n"), 0o644); err != nil {
			return err
		}
	}
	return filepath.Walk(w, func(p string, _ os.FileInfo, err error) error {
		if err == nil {
			fx.chown(p)
		}
		return nil
	})
}

// nodeProxy serves an egress proxy for one case on a Unix socket, with the
// case's allow-list and the DNS canary as its resolver, as a node-wide
// proxy would run.
func (fx *fixture) nodeProxy(ctx context.Context, c Case, vars map[string]string) (string, func(), error) {
	var allow []string
	for _, a := range c.Allow {
		s, err := expand(a, vars)
		if err != nil {
			return "", nil, err
		}
		allow = append(allow, s)
	}
	px, err := proxy.New(proxy.Config{Allow: allow, Resolver: resolverFor(vars["dns"])})
	if err != nil {
		return "", nil, err
	}
	sock := filepath.Join(fx.base, "px", c.ID+".sock")
	ln, err := net.Listen("unix", sock)
	if err != nil {
		return "", nil, err
	}
	os.Chmod(sock, 0o600)
	fx.chown(sock)
	pctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { px.Serve(pctx, ln); close(done) }()
	return sock, func() { cancel(); <-done }, nil
}

// launch runs argv for one side of a case and returns what the probe
// printed.
func (fx *fixture) launch(ctx context.Context, c Case, side, w string, argv []string, vars map[string]string, timeout time.Duration) (probeRun, error) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
	cmd.WaitDelay = 2 * time.Second
	cmd.Dir = w
	control := ""
	if side == "control" {
		control = c.Control
		cmd.Env = []string{"PATH=/usr/local/bin:/usr/bin:/bin", "HOME=" + w}
		if c.Judge == "port-canary" {
			// The control's proxy is the TCP canary: a loopback TCP
			// listener, as the proxy's port is on both platforms.
			cmd.Env = append(cmd.Env, "HTTP_PROXY=http://"+vars["tcp4"])
		}
		if c.Launch == "sigkill" {
			control = "caller" // sandbox-run --sandbox off runs the probe as the caller
			// sandbox-run refuses a workdir that is the caller's home.
			cmd.Env = []string{"PATH=/usr/local/bin:/usr/bin:/bin", "HOME=" + fx.base}
		}
	} else {
		cmd.Env = append(os.Environ(), "XDG_CACHE_HOME="+fx.cache)
		if c.Launch == "sigkill" {
			cmd.Env = append(cmd.Env, "TMPDIR="+fx.tmp)
		}
		control = "caller"
	}
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	var tty *os.File
	switch c.Launch {
	case "fds":
		var files []*os.File
		for i := 0; i < 5; i++ {
			f, err := os.Open(fx.flag)
			if err != nil {
				return probeRun{}, err
			}
			defer f.Close()
			files = append(files, f)
		}
		cmd.ExtraFiles = files
	case "pty":
		master, slave, err := openPty()
		if err != nil {
			return probeRun{}, fmt.Errorf("pty: %w", err)
		}
		defer master.Close()
		defer slave.Close()
		if fx.root {
			slave.Chown(fx.uid, fx.gid)
		}
		go io.Copy(io.Discard, master)
		tty = slave
		cmd.Stdin = slave
	}
	cmd.SysProcAttr = fx.sysProcAttr(control, tty)
	if c.Launch == "sigkill" {
		return launchAndKill(cmd, &stderr)
	}
	if c.Judge == "port-canary" {
		return launchPortCanary(cmd, &stderr, vars["exfil_name"], portCanaryBind)
	}
	out, err := cmd.Output()
	var ee *exec.ExitError
	if err != nil && !errors.As(err, &ee) {
		return probeRun{}, err
	}
	pr := parseProbe(string(out))
	if pr.verdict == "" {
		pr.lines = append(pr.lines, fmt.Sprintf("exit %v; stderr: %s", err, probe.OneLine(stderr.String())))
	}
	return pr, nil
}

// launchAndKill starts cmd, waits for the probe to say its children are
// running, and kills cmd (sandbox-run itself) with SIGKILL.
func launchAndKill(cmd *exec.Cmd, stderr *bytes.Buffer) (probeRun, error) {
	out, err := cmd.StdoutPipe()
	if err != nil {
		return probeRun{}, err
	}
	if err := cmd.Start(); err != nil {
		return probeRun{}, err
	}
	got := make(chan string, 1)
	go func() {
		l, _ := bufio.NewReader(out).ReadString('\n')
		got <- l
		io.Copy(io.Discard, out)
	}()
	var line string
	select {
	case line = <-got:
	case <-time.After(10 * time.Second):
	}
	cmd.Process.Kill()
	cmd.Wait()
	if strings.TrimSpace(line) != "SPAWNED" {
		return probeRun{lines: []string{fmt.Sprintf("the probe did not start its children: %q; stderr: %s", line, probe.OneLine(stderr.String()))}}, nil
	}
	return probeRun{verdict: "judged"}, nil
}

// noCanaryError: the canary a case needs could not be set up on this
// machine for this run (its port is held by another process); the case is
// untested, and this is not a bug of the runner.
type noCanaryError struct{ what, why string }

func (e *noCanaryError) Error() string { return "canary missing: " + e.what + ": " + e.why }

// launchPortCanary runs a udp-proxy-port probe: it reads the address the
// probe names (PORT ADDR), binds a UDP canary at ADDR on the host, says GO
// and judges by whether the canary received payload. On Linux ADDR is the
// init's port inside the sandbox's network namespace, which the host's
// loopback does not share: a datagram that reaches the host's port of that
// number left the namespace. On macOS ADDR is the proxy's own loopback TCP
// port, whose UDP side the runner's canary holds. A probe that names no
// address or prints no verdict is no judgement (the case is untested,
// never held); a port the canary cannot have within wait is a
// noCanaryError.
func launchPortCanary(cmd *exec.Cmd, stderr *bytes.Buffer, payload string, wait time.Duration) (probeRun, error) {
	in, err := cmd.StdinPipe()
	if err != nil {
		return probeRun{}, err
	}
	defer in.Close()
	out, err := cmd.StdoutPipe()
	if err != nil {
		return probeRun{}, err
	}
	if err := cmd.Start(); err != nil {
		return probeRun{}, err
	}
	stop := func() { // Wait closes the pipe after cmd.WaitDelay
		in.Close()
		cmd.Process.Kill()
		cmd.Wait()
	}
	br := bufio.NewReader(out)
	first := make(chan string, 1)
	go func() { l, _ := br.ReadString('\n'); first <- l }()
	var line string
	select {
	case line = <-first:
	case <-time.After(probe.PortGoWait):
	}
	addr, ok := strings.CutPrefix(strings.TrimSpace(line), "PORT ")
	if !ok {
		stop()
		return probeRun{lines: []string{fmt.Sprintf("the probe named no proxy port: %q; stderr: %s", line, probe.OneLine(stderr.String()))}}, nil
	}
	pc, err := listenPortCanary(addr, wait)
	if err != nil {
		io.WriteString(in, "NO\n")
		stop()
		return probeRun{}, &noCanaryError{what: "a UDP canary at " + addr + " on the host", why: probe.ErrText(err)}
	}
	io.WriteString(in, "GO\n")
	rest, _ := io.ReadAll(br) // until the probe ends, or its timeout kills it
	in.Close()
	werr := cmd.Wait()
	got := pc.received(payload, 500*time.Millisecond)
	pr := parseProbe(string(rest))
	if pr.verdict == "" {
		pr.lines = append(pr.lines, fmt.Sprintf("exit %v; stderr: %s", werr, probe.OneLine(stderr.String())))
		return pr, nil
	}
	detail := fmt.Sprintf("the UDP canary the runner bound at %s on the host received the datagram: %v", addr, got)
	pr.subs = map[string]bool{"port-canary": got}
	pr.order = []string{"port-canary"}
	pr.details = map[string]string{"port-canary": detail}
	pr.lines = append(pr.lines, "port-canary "+detail)
	return pr, nil
}

// hostFileWait bounds how long the "host-file-late" judge waits for a
// write that a host service (launchd, Terminal) makes on the command's
// behalf, after the run.
const hostFileWait = 3 * time.Second

// judgeSurvivors looks for processes tagged for this run once it is over:
// the control must leave them (it reached "outliving the run"); the
// confined run must not. Every survivor found is killed.
func judgeSurvivors(pr probeRun, tag string, control bool) probeRun {
	if pr.verdict == "" {
		return pr
	}
	wait := 3 * time.Second
	if control {
		wait = 300 * time.Millisecond
	}
	deadline := time.Now().Add(wait)
	var alive []int
	for {
		var err error
		if alive, err = tagged(tag); err != nil {
			// No listing is no judgement: the case could not run.
			pr.verdict = ""
			pr.lines = append(pr.lines, "survivors not judged: "+err.Error())
			return pr
		}
		if len(alive) == 0 && !control || time.Now().After(deadline) {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	for _, pid := range alive {
		unix.Kill(pid, unix.SIGKILL)
	}
	detail := fmt.Sprintf("%d tagged processes alive after the run", len(alive))
	pr.subs = map[string]bool{"survivors": len(alive) > 0}
	pr.order = []string{"survivors"}
	pr.details = map[string]string{"survivors": detail}
	pr.lines = append(pr.lines, "survivors "+detail)
	return pr
}
