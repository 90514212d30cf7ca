package sandbox

import (
	"bytes"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/sandbox-run/sandbox-run/internal/sandboxtest"
	"github.com/sandbox-run/sandbox-run/policy"
)

// gvRunSh runs sh -c script under tier 2 in workdir w and returns the
// result and what the command wrote to stdout and stderr.
func gvRunSh(t *testing.T, p policy.Policy, script string, opts Options) (*Result, string, error) {
	t.Helper()
	p.Sandbox = policy.ModeGvisor
	out, err := os.CreateTemp(t.TempDir(), "out")
	if err != nil {
		t.Fatal(err)
	}
	defer out.Close()
	opts.Stdout, opts.Stderr = out, out
	res, rerr := Run(t.Context(), p, []string{"sh", "-c", script}, opts)
	b, _ := os.ReadFile(out.Name())
	return res, string(b), rerr
}

// TestGvisorKernel: the command's kernel is gVisor's, read back from
// inside and seen by the command itself. Control: the host's kernel
// release is not gVisor's, so the check could fail.
func TestGvisorKernel(t *testing.T) {
	sandboxtest.Runsc(t)
	hostRel, err := exec.Command("uname", "-r").Output()
	if err != nil {
		t.Fatal(err)
	}
	w := sandboxtest.WorkDir(t)
	res, out, err := gvRunSh(t, policy.Policy{Workdir: w}, "uname -r", Options{})
	if err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	if strings.TrimSpace(out) == strings.TrimSpace(string(hostRel)) {
		t.Errorf("the command sees the host's kernel release %q", out)
	}
	r := res.Report
	if r.Tier != 2 || r.Mechanism != "gvisor" || r.Gvisor == nil || r.Gvisor.Version == "" {
		t.Fatalf("report: tier %d, mechanism %q, gvisor %+v", r.Tier, r.Mechanism, r.Gvisor)
	}
	if r.Readback == nil || r.Readback.Kernel == nil || !strings.Contains(r.Readback.Kernel.Dmesg, "gVisor") {
		t.Fatalf("readback: %+v", r.Readback)
	}
	for _, pr := range r.Protections {
		if pr.Name == "kernel:gvisor" && (pr.Verified == nil || !*pr.Verified) {
			t.Errorf("kernel:gvisor not verified: %+v", pr)
		}
	}
	if os.Geteuid() == 0 && r.Readback.UID != policy.DefaultUID {
		t.Errorf("as root the command runs as uid %d inside, want %d", r.Readback.UID, policy.DefaultUID)
	}
}

// TestGvisorLayout: the workdir is writable at its own path, the system
// is read-only, a host file outside every bind is absent, and a protected
// path is held. Control: each attempt succeeds unconfined.
func TestGvisorLayout(t *testing.T) {
	sandboxtest.Runsc(t)
	w := sandboxtest.WorkDir(t)
	secretDir := t.TempDir()
	secret := filepath.Join(secretDir, "secret")
	if err := os.WriteFile(secret, []byte("s3cret"), 0o644); err != nil {
		t.Fatal(err)
	}
	os.Chmod(secretDir, 0o755)
	if err := os.MkdirAll(filepath.Join(w, ".git"), 0o755); err != nil {
		t.Fatal(err)
	}
	cfg := filepath.Join(w, ".git", "config")
	if err := os.WriteFile(cfg, []byte("[core]\n"), 0o666); err != nil {
		t.Fatal(err)
	}
	sandboxtest.Chown(t, filepath.Join(w, ".git"))
	sandboxtest.Chown(t, cfg)
	sysTarget := t.TempDir() // stands in for /usr in the control
	script := func(usr string) string {
		return "echo ok > out; echo x > " + usr + "/x && echo USR-WRITTEN; cat " + secret + " && echo SECRET-READ; echo evil >> .git/config && echo GIT-WRITTEN; exit 0"
	}
	c := exec.Command("sh", "-c", script(sysTarget))
	c.Dir = w
	ctl, err := c.CombinedOutput()
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"USR-WRITTEN", "SECRET-READ", "GIT-WRITTEN"} {
		if !bytes.Contains(ctl, []byte(want)) {
			t.Fatalf("control: %s did not happen unconfined: %s", want, ctl)
		}
	}
	os.WriteFile(cfg, []byte("[core]\n"), 0o666)
	os.Remove(filepath.Join(w, "out"))
	_, out, err := gvRunSh(t, policy.Policy{Workdir: w}, script("/usr"), Options{})
	if err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	for _, bad := range []string{"USR-WRITTEN", "SECRET-READ", "GIT-WRITTEN"} {
		if strings.Contains(out, bad) {
			t.Errorf("%s under gvisor: %s", bad, out)
		}
	}
	if b, err := os.ReadFile(filepath.Join(w, "out")); err != nil || string(b) != "ok\n" {
		t.Errorf("the workdir was not writable at its path: %q, %v", b, err)
	}
	if b, _ := os.ReadFile(cfg); string(b) != "[core]\n" {
		t.Errorf(".git/config changed: %q", b)
	}
}

// TestGvisorExit: the command's status, 128+N for a signal, 127 for a
// command that does not exist, and a relayed SIGTERM reaching its trap.
func TestGvisorExit(t *testing.T) {
	sandboxtest.Runsc(t)
	w := sandboxtest.WorkDir(t)
	for script, want := range map[string]int{"exit 3": 3, "kill -TERM $$": 143, "true": 0} {
		res, out, err := gvRunSh(t, policy.Policy{Workdir: w}, script, Options{})
		if err != nil || res.ExitCode != want {
			t.Errorf("%q: exit %v, err %v, want %d: %s", script, res, err, want, out)
		}
	}
	_, err := Run(t.Context(), policy.Policy{Workdir: w, Sandbox: policy.ModeGvisor}, []string{"no-such-command-xyz"}, Options{})
	var ee *ExecError
	if !errors.As(err, &ee) || ee.Code != 127 {
		t.Errorf("missing command: %v, want ExecError 127", err)
	}
	sigs := make(chan os.Signal, 1)
	go func() { time.Sleep(2 * time.Second); sigs <- syscall.SIGTERM }()
	start := time.Now()
	res, out, err := gvRunSh(t, policy.Policy{Workdir: w}, "trap 'exit 7' TERM; sleep 30 & wait", Options{Signals: sigs})
	// 7: the trap ran; 143: the signal came before sh set the trap (a
	// slow start under load). Either way it reached the command, which
	// would otherwise sleep for 30 s.
	if err != nil || (res.ExitCode != 7 && res.ExitCode != 143) || time.Since(start) > 25*time.Second {
		t.Errorf("SIGTERM relay: %+v, %v after %v: %s", res, err, time.Since(start), out)
	}
}

// TestGvisorRefusals: what tier 2 cannot enforce is refused before
// anything runs, and a runsc in the workdir is refused.
func TestGvisorRefusals(t *testing.T) {
	w := sandboxtest.WorkDir(t)
	fake := filepath.Join(w, "runsc")
	if err := os.WriteFile(fake, []byte("#!/bin/sh\necho runsc version 1\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	for name, tc := range map[string]struct {
		p    policy.Policy
		opts Options
		want string
	}{
		"pids":              {policy.Policy{Workdir: w, Pids: 64}, Options{}, "--pids"},
		"runsc in workdir":  {policy.Policy{Workdir: w}, Options{RunscPath: fake}, "lies in writable directory"},
		"runsc absent":      {policy.Policy{Workdir: w}, Options{RunscPath: "/nonexistent/runsc"}, "runsc not found"},
		"TMPDIR in workdir": {policy.Policy{Workdir: w}, Options{}, "TMPDIR"},
		"terminal":          {policy.Policy{Workdir: w}, Options{Terminal: os.Stdin}, "--no-tty"},
	} {
		t.Run(name, func(t *testing.T) {
			tc.p.Sandbox = policy.ModeGvisor
			if name == "TMPDIR in workdir" {
				t.Setenv("TMPDIR", w)
			}
			_, err := Run(t.Context(), tc.p, []string{"true"}, tc.opts)
			if !errors.Is(err, ErrSetup) || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("err = %v, want a setup error naming %q", err, tc.want)
			}
		})
	}
}

// TestAutoNeverGvisor: tier 2 is asked for by name; auto is tier 1 even
// where runsc works. Control: the same policy with ModeGvisor is tier 2.
func TestAutoNeverGvisor(t *testing.T) {
	sandboxtest.Bwrap(t)
	sandboxtest.Runsc(t)
	w := sandboxtest.WorkDir(t)
	for mode, want := range map[policy.Mode]string{policy.ModeAuto: "bwrap", "": "bwrap", policy.ModeGvisor: "gvisor"} {
		res, err := Run(t.Context(), policy.Policy{Workdir: w, Sandbox: mode}, []string{"true"}, Options{})
		if err != nil || res.Report.Mechanism != want {
			t.Errorf("mode %q: %+v, %v; want mechanism %s", mode, res, err, want)
		}
	}
}

// TestGvisorLimits: --nofile and --fsize are gVisor's rlimits, seen by the
// command; the timer ends a run on time and classifies it. Control: the
// same shell outside has a different open-file limit.
func TestGvisorLimits(t *testing.T) {
	sandboxtest.Runsc(t)
	w := sandboxtest.WorkDir(t)
	ctl, err := exec.Command("sh", "-c", "ulimit -n").Output()
	if err != nil || strings.TrimSpace(string(ctl)) == "77" {
		t.Fatalf("control: ulimit -n outside is %q (%v)", ctl, err)
	}
	res, out, err := gvRunSh(t, policy.Policy{Workdir: w, NoFile: 77, FSize: 4096},
		"ulimit -n; head -c 8192 /dev/zero > big; wc -c < big", Options{})
	if err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	if f := strings.Fields(out); len(f) < 2 || f[0] != "77" || f[len(f)-1] != "4096" {
		t.Errorf("nofile/fsize not in force inside: %q", out)
	}
	found := 0
	for _, l := range res.Report.Limits {
		if (l.Name == "nofile" || l.Name == "fsize") && strings.Contains(l.Enforced, "gVisor") {
			found++
		}
	}
	if found != 2 {
		t.Errorf("report limits: %+v", res.Report.Limits)
	}
	// The deadline leaves the sandbox ample time to start even on a
	// loaded machine; a run that outlives it by far was not ended.
	start := time.Now()
	res, err = Run(t.Context(), policy.Policy{Workdir: w, Sandbox: policy.ModeGvisor, Timeout: policy.Duration(10 * time.Second)},
		[]string{"sleep", "120"}, Options{})
	if d := time.Since(start); d > 60*time.Second || err != nil || res == nil || res.ExitCode != ExitTimeout ||
		res.Report.Exit == nil || res.Report.Exit.Class != "timed_out" {
		t.Errorf("timeout: after %v, %+v, %v", d, res, err)
	}
}
