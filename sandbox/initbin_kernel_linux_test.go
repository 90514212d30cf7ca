package sandbox

import (
	"bytes"
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/sandbox-run/sandbox-run/internal/sandboxtest"
	"github.com/sandbox-run/sandbox-run/policy"
)

// initOf runs `readlink /proc/1/exe` on bwrap's init path (forwarding for
// the proxy) with ib as Options.Init and returns what the command read,
// the binary PID 1 runs, and the run's debug log. The run must succeed.
func initOf(t *testing.T, w string, ib InitBinary) (exe, log string) {
	t.Helper()
	p := policy.Policy{Workdir: w, Sandbox: policy.ModeBwrap, AllowHosts: []string{"example.com"}}
	return runInit(t, p, ib, "readlink", "/proc/1/exe")
}

// runInit runs cmd under p with ib as Options.Init and returns its output
// and the run's debug log. The run must succeed.
func runInit(t *testing.T, p policy.Policy, ib InitBinary, cmd ...string) (out, log string) {
	t.Helper()
	f, err := os.CreateTemp(t.TempDir(), "out")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var logBuf bytes.Buffer
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	res, err := Run(ctx, p, cmd, Options{Stdout: f, Stderr: f, Init: ib,
		Logger: slog.New(slog.NewTextHandler(&logBuf, &slog.HandlerOptions{Level: slog.LevelDebug}))})
	b, _ := os.ReadFile(f.Name())
	if err != nil || res.ExitCode != 0 {
		t.Fatalf("run: %v (result %+v); output %q", err, res, b)
	}
	return strings.TrimSpace(string(b)), logBuf.String()
}

// TestInitBinary: bwrap runs sandbox-run-init as init exactly when it is
// the build named, not reached through a writable directory, a regular
// file and executable by the sandbox's uid; otherwise this binary, and
// the run goes on. Control: the command's view of PID 1's binary tells
// the two apart (the zero InitBinary shows this test binary).
func TestInitBinary(t *testing.T) {
	sandboxtest.Bwrap(t)
	helper, id := sandboxtest.BuildInit(t)
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	if self, err = filepath.EvalSymlinks(self); err != nil {
		t.Fatal(err)
	}
	w := sandboxtest.WorkDir(t)
	if got, _ := initOf(t, w, InitBinary{}); got != self {
		t.Fatalf("untested: with no InitBinary the command sees PID 1 run %q, not this binary %q", got, self)
	}
	if got, log := initOf(t, w, InitBinary{Path: helper, BuildID: id}); got != helper {
		t.Fatalf("PID 1 runs %q, want sandbox-run-init %s; log:\n%s", got, helper, log)
	}

	copyTo := func(dst string, mode os.FileMode) string {
		b, err := os.ReadFile(helper)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(dst, b, mode); err != nil {
			t.Fatal(err)
		}
		return dst
	}
	elsewhere := sandboxtest.WorkDir(t) // not the run's
	// Not executable by the sandbox's uid: 65534 under root, else the
	// caller, who owns the copy.
	noExec := os.FileMode(0o700)
	if os.Geteuid() != 0 {
		noExec = 0o600
	}
	if err := os.Symlink(helper, filepath.Join(w, "link")); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		ib   InitBinary
		why  string
	}{
		{"another build", InitBinary{Path: helper, BuildID: "not/this/build"}, "another build"},
		{"no build ID asked for", InitBinary{Path: helper}, "no build ID"},
		{"in the workdir", InitBinary{Path: copyTo(filepath.Join(w, "sandbox-run-init"), 0o755), BuildID: id}, "writable dir " + w},
		{"through a link in the workdir", InitBinary{Path: filepath.Join(w, "link"), BuildID: id}, "writable dir " + w},
		{"not executable by the sandbox's uid", InitBinary{Path: copyTo(filepath.Join(elsewhere, "init-noexec"), noExec), BuildID: id}, "not executable"},
		{"a directory", InitBinary{Path: elsewhere, BuildID: id}, "not a regular file"},
		{"missing", InitBinary{Path: filepath.Join(elsewhere, "none"), BuildID: id}, "none"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, log := initOf(t, w, tc.ib)
			if got != self {
				t.Fatalf("PID 1 runs %q, want this binary %s", got, self)
			}
			if !strings.Contains(log, tc.why) {
				t.Errorf("the debug log does not say why (%q):\n%s", tc.why, log)
			}
		})
	}
}

// TestInitBinaryExecShim: an rlimit the sandbox's sh cannot set (--nofile)
// goes through the exec shim, which init starts as /proc/self/exe: with
// sandbox-run-init as init, that is sandbox-run-init again, and the
// command starts under the limit. Control: the caller's own limit differs.
func TestInitBinaryExecShim(t *testing.T) {
	sandboxtest.Bwrap(t)
	helper, id := sandboxtest.BuildInit(t)
	var rl unix.Rlimit
	if err := unix.Getrlimit(unix.RLIMIT_NOFILE, &rl); err != nil || rl.Cur == probeNoFile {
		t.Fatalf("untested: the caller's RLIMIT_NOFILE is already %d (%v)", rl.Cur, err)
	}
	p := policy.Policy{Workdir: sandboxtest.WorkDir(t), Sandbox: policy.ModeBwrap, NoFile: probeNoFile}
	out, log := runInit(t, p, InitBinary{Path: helper, BuildID: id}, "sh", "-c", "readlink /proc/1/exe; ulimit -n")
	if want := helper + "\n" + strconv.Itoa(probeNoFile); strings.TrimSpace(out) != want {
		t.Fatalf("the command printed %q, want %q (init sandbox-run-init, --nofile held); log:\n%s", out, want, log)
	}
}
