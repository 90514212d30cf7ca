package sandbox

import (
	"errors"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/sandbox-run/sandbox-run/internal/protect"
	"github.com/sandbox-run/sandbox-run/internal/sandboxtest"
	"github.com/sandbox-run/sandbox-run/landlock"
	"github.com/sandbox-run/sandbox-run/policy"
	"github.com/sandbox-run/sandbox-run/report"
)

// llProbeArg makes this test binary a probe: __llprobe NAME [ARG] tries
// one thing and prints "ok" or "denied ERRNO".
const llProbeArg = "__llprobe"

func init() {
	if len(os.Args) > 2 && os.Args[1] == llProbeArg {
		os.Stdout.WriteString(llProbe(os.Args[2], os.Args[3:]) + "\n")
		os.Exit(0)
	}
}

func llProbe(name string, args []string) string {
	arg := func(i int) string {
		if i < len(args) {
			return args[i]
		}
		return ""
	}
	var err error
	switch name {
	case "read":
		_, err = os.ReadFile(arg(0))
	case "write":
		err = os.WriteFile(arg(0), []byte("x"), 0o644)
	case "truncate":
		err = unix.Truncate(arg(0), 0)
	case "udp":
		err = closeFD(unix.Socket(unix.AF_INET, unix.SOCK_DGRAM, 0))
	case "unix":
		err = closeFD(unix.Socket(unix.AF_UNIX, unix.SOCK_STREAM, 0))
	case "socketpair":
		var fds [2]int
		fds, err = unix.Socketpair(unix.AF_UNIX, unix.SOCK_STREAM, 0)
		if err == nil {
			unix.Close(fds[0])
			unix.Close(fds[1])
		}
	case "connect":
		var c net.Conn
		c, err = net.DialTimeout("tcp", arg(0), 3*time.Second)
		if err == nil {
			c.Close()
		}
	case "shmget":
		var id int
		id, err = unix.SysvShmGet(unix.IPC_PRIVATE, 4096, unix.IPC_CREAT|0o600)
		if err == nil {
			unix.SysvShmCtl(id, unix.IPC_RMID, nil)
		}
	case "signal":
		pid, _ := strconv.Atoi(arg(0))
		err = unix.Kill(pid, 0)
	case "orphan":
		// A setsid grandchild that outlives the command: its pid on stdout.
		c := exec.Command("/bin/sleep", "60")
		c.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
		if err = c.Start(); err == nil {
			return "ok " + strconv.Itoa(c.Process.Pid)
		}
	default:
		return "bad probe " + name
	}
	if err != nil {
		var en unix.Errno
		if errors.As(err, &en) {
			return "denied " + unix.ErrnoName(en)
		}
		return "denied " + err.Error()
	}
	return "ok"
}

func devNull(t *testing.T) *os.File {
	f, err := os.OpenFile(os.DevNull, os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	return f
}

func closeFD(fd int, err error) error {
	if err == nil {
		unix.Close(fd)
	}
	return err
}

// llFixture is one host laid out for the landlock probes: a workdir with
// the probe binary, a readable and writable directory outside it, a file
// passed as --read, a loopback listener and a process of the sandbox's uid
// to signal.
type llFixture struct {
	work, probe, outside, readFile, listen string
	victim                                 int
}

func newLLFixture(t *testing.T) *llFixture {
	t.Helper()
	f := &llFixture{work: sandboxtest.WorkDir(t)}
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(self)
	if err != nil {
		t.Fatal(err)
	}
	f.probe = filepath.Join(f.work, "probe")
	if err := os.WriteFile(f.probe, b, 0o755); err != nil {
		t.Fatal(err)
	}
	f.outside = sandboxtest.WorkDir(t) // readable and writable by the sandbox's uid, not granted
	if err := os.WriteFile(filepath.Join(f.outside, "secret"), []byte("s"), 0o644); err != nil {
		t.Fatal(err)
	}
	f.readFile = filepath.Join(f.outside, "readable")
	if err := os.WriteFile(f.readFile, []byte("data"), 0o666); err != nil {
		t.Fatal(err)
	}
	os.Chmod(f.readFile, 0o666)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	sandboxtest.Serve(t, ln, func(net.Conn) {}) // accepts and closes
	f.listen = ln.Addr().String()
	v := exec.Command("/bin/sleep", "60")
	if os.Geteuid() == 0 {
		v.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: policy.DefaultUID, Gid: policy.DefaultGID}}
	}
	if err := v.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { v.Process.Kill(); v.Wait() })
	f.victim = v.Process.Pid
	return f
}

// run runs one probe under mode and returns its output line.
func (f *llFixture) run(t *testing.T, mode policy.Mode, allow []string, probe ...string) string {
	t.Helper()
	out, err := os.CreateTemp(t.TempDir(), "out")
	if err != nil {
		t.Fatal(err)
	}
	defer out.Close()
	p := policy.Policy{Workdir: f.work, Sandbox: mode, Read: []string{f.readFile}, AllowHosts: allow}
	res, err := Run(t.Context(), p, append([]string{f.probe, llProbeArg}, probe...), Options{Stdout: out, Stderr: devNull(t)})
	if err != nil {
		t.Fatalf("%s %v: %v", mode, probe, err)
	}
	if res.ExitCode != 0 {
		t.Fatalf("%s %v: exit %d", mode, probe, res.ExitCode)
	}
	b, err := os.ReadFile(out.Name())
	if err != nil {
		t.Fatal(err)
	}
	return strings.TrimSpace(string(b))
}

// TestKernelLandlockMatrix: every attempt succeeds in tier 0 (the
// positive control: the host allows it) and is refused under --sandbox
// landlock with the expected errno.
func TestKernelLandlockMatrix(t *testing.T) {
	abi := sandboxtest.Landlock(t, landlock.MinABI)
	f := newLLFixture(t)
	victim := strconv.Itoa(f.victim)
	for _, tc := range []struct {
		name  string
		probe []string
		allow []string
		want  string
		abi   int // the minimum ABI that holds it
	}{
		{"read outside", []string{"read", filepath.Join(f.outside, "secret")}, nil, "denied EACCES", 3},
		{"write outside", []string{"write", filepath.Join(f.outside, "new")}, nil, "denied EACCES", 3},
		{"truncate a --read file", []string{"truncate", f.readFile}, nil, "denied EACCES", 3},
		{"udp socket", []string{"udp"}, []string{"example.com"}, "denied EPERM", 4},
		{"unix socket", []string{"unix"}, []string{"example.com"}, "denied EAFNOSUPPORT", 4},
		{"tcp to another loopback port", []string{"connect", f.listen}, []string{"example.com"}, "denied EACCES", 4},
		{"tcp without a network", []string{"connect", f.listen}, nil, "denied EAFNOSUPPORT", 3},
		{"System V shared memory", []string{"shmget"}, nil, "denied EPERM", 3},
		{"signal a process of the same uid", []string{"signal", victim}, nil, "denied EPERM", landlock.ScopeABI},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := f.run(t, policy.ModeOff, tc.allow, tc.probe...); got != "ok" {
				t.Fatalf("untested: the positive control (tier 0) got %q, want ok", got)
			}
			got := f.run(t, policy.ModeLandlock, tc.allow, tc.probe...)
			if abi < tc.abi {
				t.Logf("ABI %d < %d: a named loss; got %q", abi, tc.abi, got)
				return
			}
			if got != tc.want {
				t.Errorf("landlock: %q, want %q", got, tc.want)
			}
		})
	}
	// What must keep working under landlock.
	for _, tc := range []struct {
		name  string
		probe []string
		allow []string
	}{
		{"write in the workdir", []string{"write", filepath.Join(f.work, "out")}, nil},
		{"read a --read file", []string{"read", f.readFile}, nil},
		{"read a system file", []string{"read", "/etc/passwd"}, nil},
		{"socketpair", []string{"socketpair"}, nil},
	} {
		t.Run("works/"+tc.name, func(t *testing.T) {
			if got := f.run(t, policy.ModeLandlock, tc.allow, tc.probe...); got != "ok" {
				t.Errorf("landlock: %q, want ok", got)
			}
		})
	}
}

// TestKernelLandlockOrphans: a setsid grandchild outlives a tier-0 run
// (the naive launcher, the positive control) and is ended with a landlock
// run by sandbox-run as its subreaper.
func TestKernelLandlockOrphans(t *testing.T) {
	sandboxtest.Landlock(t, landlock.MinABI)
	f := newLLFixture(t)
	for _, tc := range []struct {
		mode      policy.Mode
		wantAlive bool
	}{{policy.ModeOff, true}, {policy.ModeLandlock, false}} {
		got := f.run(t, tc.mode, nil, "orphan")
		pidS, ok := strings.CutPrefix(got, "ok ")
		if !ok {
			t.Fatalf("%s: %q", tc.mode, got)
		}
		pid, _ := strconv.Atoi(pidS)
		alive := unix.Kill(pid, 0) == nil && !zombie(pid)
		if alive {
			unix.Kill(pid, unix.SIGKILL)
		}
		if alive != tc.wantAlive {
			t.Errorf("%s: orphan %d alive %v after the run, want %v", tc.mode, pid, alive, tc.wantAlive)
		}
	}
}

func zombie(pid int) bool {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return true
	}
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	return i < 0 || i+2 >= len(s) || s[i+2] == 'Z'
}

// TestKernelLandlockReport: the report names the mechanism, the ABI, the
// read-back and the losses.
func TestKernelLandlockReport(t *testing.T) {
	abi := sandboxtest.Landlock(t, landlock.MinABI)
	f := newLLFixture(t)
	res, err := Run(t.Context(), policy.Policy{Workdir: f.work, Sandbox: policy.ModeLandlock}, []string{"true"}, Options{Stdout: devNull(t), Stderr: devNull(t)})
	if err != nil {
		t.Fatal(err)
	}
	r := res.Report
	if r.Mechanism != "landlock" || r.Tier != 1 || r.Landlock == nil || r.Landlock.KernelABI != abi {
		t.Fatalf("report: mechanism %q tier %d landlock %+v", r.Mechanism, r.Tier, r.Landlock)
	}
	if !r.Landlock.ReadbackRootDenied || r.Landlock.ReadbackNoNewPrivs != 1 || r.Seccomp.Readback != 2 {
		t.Errorf("read-back: %+v seccomp %d", r.Landlock, r.Seccomp.Readback)
	}
	if len(r.Losses) == 0 || r.Losses[0].Name != "processes" {
		t.Errorf("losses: %+v", r.Losses)
	}
}

// The protected-path attempts of TestKernelLandlockProtected: each
// changes (or removes, or creates) a protected path and says so.
const llProtectScript = `set -e
echo evil > .mcp.json
printf '[core]\n\tfsmonitor = evil\n' > .git/config
printf '#!/bin/sh\necho evil\n' > .git/hooks/post-checkout
chmod +x .git/hooks/post-checkout
rm .git/hooks/pre-commit .bashrc
echo evil > .envrc
echo wrote`

// llProtectFixture lays out a workdir with protected paths: .mcp.json,
// .bashrc and a repository with a config and an executable hook. It
// returns their contents, by path relative to w.
func llProtectFixture(t *testing.T, w string) map[string]string {
	t.Helper()
	files := map[string]string{".mcp.json": "{}\n", ".bashrc": "alias ll=ls\n", ".git/HEAD": "ref: refs/heads/main\n",
		".git/config": "[core]\n\tbare = false\n", ".git/hooks/pre-commit": "#!/bin/sh\nexit 0\n"}
	for _, d := range []string{".git/objects", ".git/refs", ".git/hooks"} {
		if err := os.MkdirAll(filepath.Join(w, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	for name, body := range files {
		if err := os.WriteFile(filepath.Join(w, name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	os.Chmod(filepath.Join(w, ".git/hooks/pre-commit"), 0o755)
	filepath.Walk(w, func(p string, _ os.FileInfo, err error) error {
		if err == nil {
			sandboxtest.Chown(t, p)
		}
		return nil
	})
	return files
}

// TestKernelLandlockProtected: Landlock cannot hold an existing protected
// path read-only beneath the writable workdir, so the command's changes
// succeed while the run lasts (the live window, reported as a loss);
// when the run ends they are quarantined and the copies taken at the
// start are put back, a removed one included, and a protected path
// created during the run is quarantined. The positive control: the same
// script in tier 0 changes the same files, and they stay changed. Both
// with a cache (the journal shared with other runs) and without one.
func TestKernelLandlockProtected(t *testing.T) {
	sandboxtest.Landlock(t, landlock.MinABI)
	for _, withCache := range []bool{true, false} {
		t.Run("cache="+strconv.FormatBool(withCache), func(t *testing.T) {
			ctl := sandboxtest.WorkDir(t)
			llProtectFixture(t, ctl)
			res, err := Run(t.Context(), policy.Policy{Workdir: ctl, Sandbox: policy.ModeOff}, []string{"sh", "-c", llProtectScript},
				Options{Stdout: devNull(t), Stderr: devNull(t)})
			if err != nil || res.ExitCode != 0 {
				t.Fatalf("untested: the script failed in tier 0: %v %+v", err, res)
			}
			if b, _ := os.ReadFile(filepath.Join(ctl, ".mcp.json")); string(b) != "evil\n" {
				t.Fatalf("untested: tier 0 did not change .mcp.json: %q", b)
			}

			w := sandboxtest.WorkDir(t)
			want := llProtectFixture(t, w)
			opts := Options{Stderr: devNull(t)}
			cache := ""
			if withCache {
				cache = t.TempDir()
				opts.BwrapCache = cache
			}
			out, err := os.CreateTemp(t.TempDir(), "out")
			if err != nil {
				t.Fatal(err)
			}
			defer out.Close()
			opts.Stdout = out
			res, err = Run(t.Context(), policy.Policy{Workdir: w, Sandbox: policy.ModeLandlock}, []string{"sh", "-c", llProtectScript}, opts)
			if err != nil || res.ExitCode != 0 {
				t.Fatalf("landlock run: %v %+v", err, res)
			}
			if b, _ := os.ReadFile(out.Name()); !strings.Contains(string(b), "wrote") {
				t.Errorf("the writes did not all succeed during the run (the live window): %q", b)
			}
			llProtectedAfter(t, w, want, res.Report.Quarantined)
			removeQuarantine(t, res.Report.Quarantined)
			if withCache {
				if ents, _ := os.ReadDir(filepath.Join(cache, "snapshots")); len(ents) != 0 {
					t.Errorf("snapshots left in the cache: %v", ents)
				}
				if ents, _ := os.ReadDir(filepath.Join(cache, "journals")); len(ents) > 1 { // the lock file stays
					t.Errorf("journals left: %v", ents)
				}
			}
		})
	}
}

// llProtectedAfter checks w after a landlock run of llProtectScript: every
// file of want is back as it was, what the script created is gone, and the
// report's quarantined list names each change.
func llProtectedAfter(t *testing.T, w string, want map[string]string, quarantined []report.Quarantined) {
	t.Helper()
	for name, body := range want {
		p := filepath.Join(w, name)
		b, err := os.ReadFile(p)
		if err != nil || string(b) != body {
			t.Errorf("%s after the run: %q %v, want it put back as %q", name, b, err, body)
		}
	}
	if fi, err := os.Stat(filepath.Join(w, ".git/hooks/pre-commit")); err != nil || fi.Mode().Perm() != 0o755 {
		t.Errorf("pre-commit's mode after the run: %v %v", fi, err)
	}
	for _, gone := range []string{".envrc", ".git/hooks/post-checkout"} {
		if _, err := os.Lstat(filepath.Join(w, gone)); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("%s is still there after the run: %v", gone, err)
		}
	}
	q := map[string]report.Quarantined{}
	for _, it := range quarantined {
		q[strings.TrimPrefix(it.Path, w+"/")] = it
	}
	for _, name := range []string{".mcp.json", ".git/config", ".git/hooks", ".envrc", ".bashrc"} {
		if _, ok := q[name]; !ok {
			t.Errorf("the report quarantines no %s: %+v", name, quarantined)
		}
	}
	if b, err := os.ReadFile(q[".mcp.json"].To); err != nil || string(b) != "evil\n" {
		t.Errorf("the quarantined .mcp.json (%s): %q %v", q[".mcp.json"].To, b, err)
	}
	if !strings.Contains(q[".bashrc"].Why, "removed") {
		t.Errorf(".bashrc's entry: %+v", q[".bashrc"])
	}
}

// TestKernelLandlockProtectedTooLarge: a protected path past the snapshot
// bounds cannot be kept, so the run is refused before the command starts;
// the control: the same workdir with the directory one entry inside the
// bounds runs.
func TestKernelLandlockProtectedTooLarge(t *testing.T) {
	sandboxtest.Landlock(t, landlock.MinABI)
	w := sandboxtest.WorkDir(t)
	dir := filepath.Join(w, ".vscode")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	for i := range protect.SnapMaxEntries - 1 { // with .vscode itself: the bound exactly
		if err := os.WriteFile(filepath.Join(dir, strconv.Itoa(i)), nil, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	marker := filepath.Join(w, "ran")
	run := func() (*Result, error) {
		return Run(t.Context(), policy.Policy{Workdir: w, Sandbox: policy.ModeLandlock}, []string{"touch", marker},
			Options{Stdout: devNull(t), Stderr: devNull(t), BwrapCache: t.TempDir()})
	}
	if res, err := run(); err != nil || res.ExitCode != 0 {
		t.Fatalf("untested: a .vscode within the bounds did not run: %v %+v", err, res)
	}
	os.Remove(marker)
	if err := os.WriteFile(filepath.Join(dir, "one-more"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	_, err := run()
	var se *SetupError
	if !errors.As(err, &se) || !strings.Contains(se.What, "cannot keep a copy") || !strings.Contains(se.Fix, "--sandbox bwrap") {
		t.Errorf("past the bounds: %v, want a SetupError", err)
	}
	if _, err := os.Lstat(marker); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the command ran although the run was refused: %v", err)
	}
}

// removeQuarantine removes the temporary quarantine directory a run
// without a cache moved what it neutralised into (os.MkdirTemp's
// sandbox-run-quarantine-*), which the run leaves for its caller to
// inspect.
func removeQuarantine(t *testing.T, qs []report.Quarantined) {
	t.Helper()
	for _, q := range qs {
		for d := q.To; d != "" && d != "/" && d != "."; d = filepath.Dir(d) {
			if strings.HasPrefix(filepath.Base(d), "sandbox-run-quarantine-") {
				if err := os.RemoveAll(d); err != nil {
					t.Errorf("removing %s: %v", d, err)
				}
				break
			}
		}
	}
}

// TestKernelLandlockFromThePlan: --sandbox landlock translates the plan
// bwrap binds. So the report names, among its losses, where this run's
// plan holds what Landlock cannot (.bashrc held read-only beneath the
// workdir, the --read directory's FIFO covered), and the plan's
// refusals are Landlock's: a --read inside /proc, which Landlock granted
// before it took the plan, is refused with bwrap's reason, while the
// same run without it runs (the control).
func TestKernelLandlockFromThePlan(t *testing.T) {
	sandboxtest.Landlock(t, landlock.MinABI)
	w, data := sandboxtest.WorkDir(t), sandboxtest.WorkDir(t)
	if err := os.WriteFile(filepath.Join(w, ".bashrc"), []byte("alias ll=ls\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := unix.Mkfifo(filepath.Join(data, "queue"), 0o644); err != nil {
		t.Fatal(err)
	}
	run := func(read ...string) (*Result, error) {
		return Run(t.Context(), policy.Policy{Workdir: w, Sandbox: policy.ModeLandlock, Read: read}, []string{"true"},
			Options{Stdout: devNull(t), Stderr: devNull(t), BwrapCache: t.TempDir()})
	}
	res, err := run(data)
	if err != nil || res.ExitCode != 0 {
		t.Fatalf("untested: the run without a refused --read failed: %v %+v", err, res)
	}
	found := map[string]bool{}
	for _, l := range res.Report.Losses {
		for _, p := range []string{filepath.Join(w, ".bashrc"), filepath.Join(data, "queue")} {
			if strings.Contains(l.Detail, p) {
				found[p] = true
			}
		}
	}
	if len(found) != 2 {
		t.Errorf("the report's losses name %v of .bashrc and the FIFO: %+v", found, res.Report.Losses)
	}
	_, err = run("/proc/cpuinfo")
	var se *SetupError
	if !errors.As(err, &se) || se.What != "--read /proc/cpuinfo" || !strings.Contains(se.Why, "/proc") {
		t.Errorf("--read /proc/cpuinfo: %v, want the plan's refusal", err)
	}
}
