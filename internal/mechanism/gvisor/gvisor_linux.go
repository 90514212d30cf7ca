package gvisor

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	oci "github.com/sandbox-run/sandbox-run/gvisor"
	"github.com/sandbox-run/sandbox-run/internal/fault"
	"github.com/sandbox-run/sandbox-run/internal/hostnet"
	"github.com/sandbox-run/sandbox-run/internal/initproc"
	"github.com/sandbox-run/sandbox-run/internal/limits"
	"github.com/sandbox-run/sandbox-run/internal/mechanism"
	"github.com/sandbox-run/sandbox-run/internal/ociimage"
	"github.com/sandbox-run/sandbox-run/internal/plan"
	"github.com/sandbox-run/sandbox-run/internal/procid"
	"github.com/sandbox-run/sandbox-run/mount"
	"github.com/sandbox-run/sandbox-run/pathguard"
	"github.com/sandbox-run/sandbox-run/policy"
	"github.com/sandbox-run/sandbox-run/report"
)

// Where init and its status socket appear inside a tier-2 sandbox.
const (
	gvInitInside   = "/run/sandbox-run/init"
	gvStatusInside = "/run/sandbox-run/status.sock"
	gvDirPrefix    = "sandbox-run-gvisor-"
)

// gvRun is one tier-2 run being set up; undo holds its cleanup, last
// first.
type gvRun struct {
	oom      *int // runsc's processes' oom_score_adj, read back; nil unread
	p        policy.Policy
	cmd      []string
	opts     mechanism.Config
	runsc    string
	cfg      oci.Runsc
	id       string
	dir      string // private runtime dir: bundle/, state/
	bundle   string
	pl       *plan.Plan
	nw       *hostnet.Network
	status   net.Listener
	report   report.Report
	spec     oci.Bundle
	undo     mechanism.Cleanups
	uid, gid int
	img      *ociimage.Image // the root file system's image; nil: the host's
	tun      *gvTun          // transparent egress's host end; nil for none
	proc     *gvProc         // runsc run, once started
	// guard leads the process group every runsc command of the run is
	// started into and kills it if sandbox-run dies
	// (mechanism.GroupGuard); nil until runsc run starts.
	guard *mechanism.GroupGuard
	// What Prepare learnt for Attach: runsc's version, the rlimits and
	// the report's limits, the host ids the files are accessed as.
	ver              oci.Version
	rl               []oci.Rlimit
	lims             []report.Limit
	hostUID, hostGID int
	memory           int64 // the run's memory ceiling, sampled; 0: none
}

func New(p policy.Policy, cmd []string, opts mechanism.Config) (mechanism.Mechanism, error) {
	return &gvRun{p: p, cmd: cmd, opts: opts}, nil
}

func (g *gvRun) Close(*mechanism.Result) { g.undo.Run() }

func (g *gvRun) Probe(ctx context.Context) (mechanism.Host, error) {
	if err := g.probe(ctx); err != nil {
		return mechanism.Host{}, err
	}
	// Binds by path (runsc's gofer opens each source), and the sizes are
	// gVisor's tmpfs options.
	return mechanism.Host{UID: g.hostUID, GID: g.hostGID, Root: !g.cfg.Rootless, Layout: &plan.Layout{Size: true}, Ceilings: true,
		Net: hostnet.Reach{Kind: hostnet.ViaSockets}}, nil
}

func (g *gvRun) Prepare(ctx context.Context, pd mechanism.Planned) error {
	g.p, g.pl, g.memory = pd.Policy, pd.Plan, pd.Limits.Memory
	g.rl, g.lims = gvLimits(g.p, g.memory)
	if g.opts.Image != nil {
		var err error
		if g.img, err = g.opts.Image(ctx); err != nil {
			return err
		}
	}
	return nil
}

func (g *gvRun) Attach(ctx context.Context, s mechanism.Setup) (*report.Report, error) {
	g.nw = s.Net.Sockets
	if err := g.prepareSpec(ctx); err != nil {
		return nil, err
	}
	return &g.report, nil
}

// describe prints runsc's command line and the bundle's config.json,
// values redacted.
func (g *gvRun) Describe(w io.Writer) {
	b, _ := json.MarshalIndent(g.spec.Spec, "", "  ")
	fmt.Fprintf(w, "argv: %s\nconfig.json:\n%s\n", strings.Join(mechanism.QuoteAll(g.cfg.Args(g.runsc, "run", "--bundle", g.bundle, g.id)), " "), redactSpec(b, g.spec.Spec.Process.Env))
}

// redactSpec hides the values of the command's variables in a dry run.
func redactSpec(b []byte, env []string) string {
	s := string(b)
	for _, kv := range env {
		k, v, _ := strings.Cut(kv, "=")
		if v != "" {
			s = strings.ReplaceAll(s, strconv.Quote(kv), strconv.Quote(k+"=<redacted>"))
		}
	}
	return s
}

// gvRefuse refuses the limits tier 2 cannot enforce.
func gvRefuse(p policy.Policy) error {
	for _, l := range []struct {
		flag string
		set  bool
	}{{"--pids", p.Pids > 0}, {"--cpu-time", p.CPUTime > 0}} {
		if l.set {
			return fault.New(l.flag+" under --sandbox gvisor", "runsc enforces it only through a cgroup, which tier 2 does not manage yet",
				"drop "+l.flag+", or use --sandbox bwrap")
		}
	}
	return nil
}

// gvLimits renders the limits gvRefuse let through as rlimits that
// gVisor's kernel holds, and the report's lines for them and for memory,
// the run's ceiling (0: none) that launch samples runsc's tree against.
func gvLimits(p policy.Policy, memory int64) ([]oci.Rlimit, []report.Limit) {
	rl := []oci.Rlimit{{Type: "RLIMIT_CORE"}}
	out := []report.Limit{{Name: "core", Value: "0", Enforced: "rlimit (gVisor kernel)"}}
	if p.NoFile > 0 {
		rl = append(rl, oci.Rlimit{Type: "RLIMIT_NOFILE", Soft: uint64(p.NoFile), Hard: uint64(p.NoFile)})
		out = append(out, report.Limit{Name: "nofile", Value: strconv.FormatInt(p.NoFile, 10), Enforced: "rlimit (gVisor kernel)"})
	}
	if p.FSize > 0 {
		rl = append(rl, oci.Rlimit{Type: "RLIMIT_FSIZE", Soft: uint64(p.FSize), Hard: uint64(p.FSize)})
		out = append(out, report.Limit{Name: "fsize", Value: strconv.FormatInt(p.FSize, 10), Enforced: "rlimit (gVisor kernel)"})
	}
	// The default process ceiling is not the caller's request: tier 2
	// has no way to hold it (gVisor's RLIMIT_NPROC does not count the
	// sandbox's tasks), and the report says so instead of refusing every
	// run.
	out = append(out, report.Limit{Name: "pids", Value: strconv.FormatInt(policy.DefaultPids, 10), Enforced: "none", Source: report.SourceDefault})
	// Memory, the default ceiling or --memory, is held by sampling
	// runsc's process tree (limits.SampleGVisor; launch starts it). The
	// default is the skeleton's, as for every mechanism: a host whose
	// memory cannot be read is refused, never run without it.
	switch {
	case memory > 0:
		out = append(out, report.Limit{Name: "memory", Value: strconv.FormatInt(memory, 10), Enforced: string(limits.BySampler), Source: report.SourceOf(p.Memory)})
	case p.Memory == policy.NoMemoryLimit:
		out = append(out, report.Limit{Name: "memory", Value: "none", Enforced: string(limits.NotLimited), Source: report.SourcePolicy})
	}
	// gVisor's kernel serves inotify itself; runsc takes no host
	// instance for the command's, and no ceiling of the run's is set.
	return rl, append(append(mechanism.TimeoutLimit(p), out...), mechanism.InotifyLimits(limits.Inotify{})...)
}

// ids are the uid and gid the command runs as inside. As root the
// sandbox never runs as uid 0: the policy's unprivileged ids. Otherwise
// runsc runs rootless and maps the caller to gVisor's uid 0, which holds
// no capability (the spec grants none) and is the caller on the host.
func gvIDs(p policy.Policy) (uid, gid int, rootless bool, err error) {
	if os.Geteuid() != 0 {
		return 0, 0, true, nil
	}
	if p.UID == 0 {
		return 0, 0, false, &policy.InvalidError{Field: "user", Reason: "uid 0 is host root", Fix: "pass --user with an unprivileged uid"}
	}
	return p.UID, p.GID, false, nil
}

// probe refuses what tier 2 cannot hold of the policy, finds runsc and
// picks the ids the sandbox runs as.
func (g *gvRun) probe(ctx context.Context) error {
	p := g.p
	// Refusals of the policy first: the same with or without runsc.
	if g.opts.Terminal != nil {
		return fault.New("--tty", "--sandbox gvisor gives the command no terminal of its own yet", "pass --no-tty")
	}
	if err := gvRefuse(p); err != nil {
		return err
	}
	if err := hostnet.CheckTmpdir(p.Writable(), "the sandbox's bundle, runsc's state and the proxy's socket"); err != nil {
		return err
	}
	path, err := mechanism.FindTool(g.opts.Resolver, toolRunsc, g.opts.RunscPath, p.Writable())
	if err != nil {
		return err
	}
	g.runsc = path
	ver, platform, err := runscInfo(ctx, path, g.opts.BwrapCache)
	if err != nil {
		return err
	}
	uid, gid, rootless, err := gvIDs(p)
	if err != nil {
		return err
	}
	// Host-side checks (reachability of the workdir) are for the uid the
	// files are accessed as: the policy's as root, the caller's otherwise.
	hostUID, hostGID := os.Getuid(), os.Getgid()
	if !rootless {
		hostUID, hostGID = uid, gid
	}
	g.uid, g.gid = uid, gid
	// Swept beside the set-up: the runtime directories of tier-2 runs
	// whose sandbox-run was killed before its own cleanup. The sandbox died
	// with runsc, which died with sandbox-run (parent-death signals), and
	// no cgroup was made (--ignore-cgroups), so the directory is all there
	// is.
	g.undo.Push(hostnet.StartSweep(os.TempDir(), gvDirPrefix, os.Geteuid()))
	g.cfg = oci.Runsc{Rootless: rootless, HostUDS: true, Platform: platform}
	g.ver, g.hostUID, g.hostGID = ver, hostUID, hostGID
	return nil
}

// prepareSpec makes init's status socket beside the network's, renders
// the spec and, unless this is a dry run, writes the bundle.
func (g *gvRun) prepareSpec(context.Context) error {
	p, pl, log, rootless, nw := g.p, g.pl, g.opts.Log(), g.cfg.Rootless, g.nw
	runID, ver, rl, lims, hostUID, hostGID := g.opts.RunID, g.ver, g.rl, g.lims, g.hostUID, g.hostGID
	ln, statusPath, err := nw.Listen("status.sock", hostUID, hostGID, !rootless)
	if err != nil {
		return err
	}
	g.status = ln
	g.undo.Push(func() { ln.Close() })
	tun, err := g.planTun(hostUID, hostGID, !rootless, log)
	if err != nil {
		return err
	}
	if err := g.makeDir(); err != nil {
		return err
	}
	self, err := selfBinary(pl.Guard)
	if err != nil {
		return err
	}
	extra := []mount.Step{{Kind: mount.ROBind, Src: self, Dst: gvInitInside, FD: -1}, {Kind: mount.ROBind, Src: statusPath, Dst: gvStatusInside, FD: -1}}
	for _, b := range nw.Binds {
		extra = append(extra, mount.Step{Kind: mount.ROBind, Src: b[0], Dst: b[1], FD: -1})
	}
	env, err := mechanism.CommandEnv(p, nw.Env, g.opts.LookupEnv)
	if err != nil {
		return err
	}
	initCfg := initproc.Config{StatusFD: -1, StatusSocket: gvStatusInside, StderrFD: 2, Forward: nw.Forwards, Publish: nw.Publish, Tun: tun, Command: g.cmd}
	mounts := append(append(append([]mount.Step(nil), pl.Mounts...), extra...), pl.Late...)
	if g.img != nil {
		if mounts, err = plan.ImageMounts(g.img.Rootfs, mounts); err != nil {
			return err
		}
		env = plan.ImageEnv(env, g.img.Env, p)
	}
	g.spec, err = oci.Render(g.specInput(mounts, fileBinds(mounts), env, initCfg.Args(), rl, tun != nil))
	if err != nil {
		return fault.New("cannot express the sandbox as an OCI spec", err.Error(), "remove the NUL byte, or report this as a bug in sandbox-run")
	}
	g.cfg.Root = filepath.Join(g.dir, "state")
	g.id = "sandbox-run-" + runID
	g.report = g.newReport(runID, ver, env, lims)
	if g.opts.DryRun != nil {
		return nil
	}
	return g.writeBundle()
}

// specInput is the run as runsc is asked for it, once its mounts (the
// plan's, the run's own binds, the late ones, in order), the sources
// that are files, the command's environment and init's arguments are
// known. It makes no system call: TestTranslateGolden renders it from the
// plan fixtures every mechanism is tested from.
func (g *gvRun) specInput(mounts []mount.Step, files map[string]bool, env, initArgs []string, rl []oci.Rlimit, netAdmin bool) oci.Input {
	return oci.Input{
		Args: append([]string{gvInitInside, initproc.Arg}, initArgs...), Env: env, Cwd: g.p.Workdir,
		UID: g.uid, GID: g.gid, Mounts: mounts, Rlimits: rl, Rootfs: "rootfs", Empty: filepath.Join(g.bundle, "empty"),
		Files: files, NetAdmin: netAdmin,
	}
}

// fileBinds names the bind destinations whose source is not a directory.
func fileBinds(ms []mount.Step) map[string]bool {
	out := map[string]bool{}
	for _, m := range ms {
		if m.Kind != mount.ROBind && m.Kind != mount.Bind {
			continue
		}
		if fi, err := os.Stat(m.Src); err == nil && !fi.IsDir() {
			out[m.Dst] = true
		}
	}
	return out
}

// selfBinary is sandbox-run's own executable, bound in read-only as init;
// one that lies in a writable directory is refused like any bind.
func selfBinary(guard *pathguard.Guard) (string, error) {
	exe, err := os.Executable()
	if err == nil {
		exe, err = filepath.EvalSymlinks(exe)
	}
	if err != nil {
		return "", fault.New("cannot find sandbox-run's own binary", err.Error(), "run sandbox-run from a readable file")
	}
	r, err := guard.CheckRead(exe)
	if err != nil {
		return "", plan.GuardErr(err)
	}
	return r.Path, nil
}

// makeDir creates the run's private runtime directory (0700, this user's):
// the bundle and runsc's state root. Its name carries this process's
// procid name (pid, start time, pid namespace) so that a later run can
// sweep it when sandbox-run was killed before it could.
func (g *gvRun) makeDir() error {
	me, _, err := procid.Self()
	if err != nil {
		return fault.New("cannot read this process's start time", err.Error(), "mount /proc")
	}
	dir, unhold, err := hostnet.MakeRunDir(gvDirPrefix, me)
	if err != nil {
		return fault.New("cannot create the run's runtime directory", err.Error(), "check that $TMPDIR is writable")
	}
	g.dir, g.bundle = dir, filepath.Join(dir, "bundle")
	g.undo.Push(func() { os.RemoveAll(dir); unhold() })
	for _, d := range []string{g.bundle, filepath.Join(dir, "state")} {
		if err := os.Mkdir(d, 0o700); err != nil {
			return fault.New("cannot create "+d, err.Error(), "check that $TMPDIR is writable")
		}
	}
	return nil
}

// writeBundle writes config.json, the empty cover file and the root's
// mount points. The root and its points are 0755/0444: gVisor checks
// access with the command's uid, which must traverse them.
func (g *gvRun) writeBundle() error {
	b, err := json.Marshal(g.spec.Spec)
	if err == nil {
		err = pathguard.WriteFile(filepath.Join(g.bundle, "config.json"), b, 0o600)
	}
	if err == nil {
		err = pathguard.WriteFile(filepath.Join(g.bundle, "empty"), nil, 0o444)
	}
	root := filepath.Join(g.bundle, "rootfs")
	if err == nil {
		err = os.Mkdir(root, 0o755)
	}
	for _, pt := range g.spec.Points {
		if err != nil {
			break
		}
		err = makePoint(root, pt)
	}
	if err != nil {
		return fault.New("cannot write the sandbox's bundle in "+g.bundle, err.Error(), "check that $TMPDIR is writable and not full")
	}
	return nil
}

func makePoint(root string, pt oci.Point) error {
	p := filepath.Join(root, pt.Path)
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		return err
	}
	switch {
	case pt.Link != "":
		return os.Symlink(pt.Link, p)
	case pt.Dir:
		return os.MkdirAll(p, 0o755)
	}
	f, err := os.OpenFile(p, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o444)
	if err != nil {
		return err
	}
	return f.Close()
}

// runscInfo is what runsc says of itself: its version and default
// platform, from `runsc --version` and `runsc flags` (empty environment),
// remembered in cacheDir by the binary's identity like bwrap's (runsc
// is a large Go binary: each start costs about 100 ms).
func runscInfo(ctx context.Context, path, cacheDir string) (oci.Version, string, error) {
	fail := func(why string) (oci.Version, string, error) {
		return oci.Version{}, "", fault.New("cannot use runsc "+path, why, "install gVisor (apt-get install -y runsc) or pass --runsc PATH")
	}
	var e struct{ Version, Flags string }
	name, dir := runscCacheName(path), (*pathguard.Dir)(nil)
	if name != "" && cacheDir != "" {
		if d, err := pathguard.OpenPrivateDir(cacheDir); err == nil {
			dir = d
			defer d.Close()
			if b, err := d.ReadFile(name); err == nil && json.Unmarshal(b, &e) == nil {
				if v, err := oci.ParseVersion(e.Version); err == nil {
					return v, oci.DefaultPlatform(e.Flags), nil
				}
			}
		}
	}
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	for _, q := range []struct {
		arg string
		out *string
	}{{"--version", &e.Version}, {"flags", &e.Flags}} {
		c := exec.CommandContext(ctx, path, q.arg)
		c.Env = []string{}
		// Before the run's group guard exists: a sandbox-run killed here
		// takes the query with it.
		c.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
		b, err := c.CombinedOutput()
		if err != nil {
			return fail("runsc " + q.arg + ": " + fault.Reason(err))
		}
		*q.out = string(b)
	}
	v, err := oci.ParseVersion(e.Version)
	if err != nil {
		return fail(err.Error())
	}
	if b, err := json.Marshal(e); err == nil && dir != nil {
		dir.WriteFile(name, b) // a failure costs the next run a probe
	}
	return v, oci.DefaultPlatform(e.Flags), nil
}

// runscCacheName names the cache entry of the runsc at path by its
// identity (device, inode, size, times): a replaced binary is probed
// again.
func runscCacheName(path string) string {
	var st syscall.Stat_t
	if err := syscall.Stat(path, &st); err != nil {
		return ""
	}
	h := sha256.Sum256([]byte(fmt.Sprintf("%s|%d|%d|%d|%d.%d|%d.%d", path, st.Dev, st.Ino, st.Size,
		st.Mtim.Sec, st.Mtim.Nsec, st.Ctim.Sec, st.Ctim.Nsec)))
	return "runsc-" + hex.EncodeToString(h[:12]) + ".json"
}

// toolRunsc names runsc for FindTool's messages.
var toolRunsc = mechanism.Tool{Name: "runsc", Flag: "--runsc", Install: "install gVisor (apt-get install -y runsc) or pass --runsc PATH"}
