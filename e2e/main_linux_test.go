package e2e

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/sandbox-run/sandbox-run/internal/sandboxtest"
)

// The helpers every kernel test of this package uses: the tests run only on
// Linux, so the helpers live in a Linux file (elsewhere they would be
// unused code).

type result struct {
	stdout, stderr string
	code           int
}

// run runs sandbox-run with args, stdin as given, under a bounded deadline.
func run(t *testing.T, stdin string, args ...string) result {
	t.Helper()
	return runEnv(t, nil, stdin, args...)
}

func runEnv(t *testing.T, env []string, stdin string, args ...string) result {
	t.Helper()
	return runBin(t, bin, env, stdin, args...)
}

// runBin is runEnv with the sandbox-run binary sbx.
func runBin(t *testing.T, sbx string, env []string, stdin string, args ...string) result {
	t.Helper()
	return runBinWithin(t, 60*time.Second, sbx, env, stdin, args...)
}

// runBinWithin is runBin bounded by d: past it sandbox-run is killed and
// the test fails saying so (a bound, not a time asserted: it keeps a
// hung run from holding the suite).
func runBinWithin(t *testing.T, d time.Duration, sbx string, env []string, stdin string, args ...string) result {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	c := exec.CommandContext(ctx, sbx, args...)
	c.Env = append(os.Environ(), env...)
	c.Stdin = strings.NewReader(stdin)
	var o, e bytes.Buffer
	c.Stdout, c.Stderr = &o, &e
	err := c.Run()
	if ctx.Err() != nil {
		t.Fatalf("sandbox-run %v did not end within the test's bound of %v and was killed; stdout %q, stderr %q", args, d, o.String(), e.String())
	}
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode() // -1 if sandbox-run itself died of a signal
	} else if err != nil {
		t.Fatalf("running sandbox-run: %v", err)
	}
	return result{o.String(), e.String(), code}
}

// sandboxed runs sh -c script in a tier-1 sandbox on workdir w.
func sandboxed(t *testing.T, w, script string, extra ...string) result {
	t.Helper()
	args := append([]string{"run", "--workdir", w}, extra...)
	args = append(args, "--", "sh", "-c", script)
	return run(t, "", args...)
}

// unconfined runs the same script with --sandbox off: the positive control.
func unconfined(t *testing.T, w, script string, extra ...string) result {
	t.Helper()
	return sandboxed(t, w, script, append([]string{"--sandbox", "off"}, extra...)...)
}

// needBwrap gates a test on a working bwrap (fails under SANDBOX_REQUIRE=1).
func needBwrap(t *testing.T) {
	t.Helper()
	sandboxtest.Bwrap(t)
}

// oneLine asserts a refusal: exit 125 and one line on stderr holding each
// of want.
func oneLine(t *testing.T, r result, want ...string) {
	t.Helper()
	if r.code != 125 {
		t.Fatalf("exit %d, want 125; stderr: %s", r.code, r.stderr)
	}
	msg := strings.TrimRight(r.stderr, "\n")
	if strings.Contains(msg, "\n") || msg == "" {
		t.Errorf("stderr is not one line: %q", r.stderr)
	}
	for _, w := range want {
		if !strings.Contains(msg, w) {
			t.Errorf("message %q lacks %q", msg, w)
		}
	}
}
