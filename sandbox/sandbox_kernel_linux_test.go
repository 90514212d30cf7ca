package sandbox

import (
	"os"
	"syscall"
	"testing"
	"time"

	"github.com/sandbox-run/sandbox-run/internal/sandboxtest"
	"github.com/sandbox-run/sandbox-run/policy"
)

// TestMain lets this test binary stand in for sandbox-run inside the
// sandbox (Run starts /proc/self/exe as init), and for a run that a test
// starts in a child process (runHelpers; after Reexec, whose modes the
// child's own runs start it in).
func TestMain(m *testing.M) {
	if code, ok := Reexec(os.Args[1:]); ok {
		os.Exit(code)
	}
	if mode := os.Getenv(runHelperEnv); mode != "" {
		os.Exit(runHelper(mode))
	}
	os.Exit(m.Run())
}

// TestEarlySignalNotLost: a signal that arrives before the sandbox is set
// up is held and delivered once the command runs (init, as PID 1, would
// drop a signal it has no handler for yet).
func TestEarlySignalNotLost(t *testing.T) {
	sandboxtest.Bwrap(t)
	w := sandboxtest.WorkDir(t)
	sigs := make(chan os.Signal, 1)
	sigs <- syscall.SIGTERM // before Run has even started bwrap
	null, _ := os.Open(os.DevNull)
	defer null.Close()
	start := time.Now()
	res, err := Run(t.Context(), policy.Policy{Workdir: w}, []string{"sh", "-c", "trap 'exit 7' TERM; sleep 30 & wait"},
		Options{Signals: sigs, Stdout: null, Stderr: null})
	if err != nil {
		t.Fatal(err)
	}
	if d := time.Since(start); d > 15*time.Second {
		t.Fatalf("the early SIGTERM was lost: the run took %v", d)
	}
	if res.ExitCode != 7 && res.ExitCode != 128+15 {
		t.Errorf("exit %d, want 7 (the trap) or 143 (before the trap was set)", res.ExitCode)
	}
}
