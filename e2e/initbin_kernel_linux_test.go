package e2e

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sandbox-run/sandbox-run/internal/sandboxtest"
)

// TestInitBinaryPair: the binary make build makes (BuildSandboxRun builds
// it the same way) runs sandbox-run-init beside it as init on the network
// path, and itself when the file beside it is another build or missing;
// the run succeeds either way. The command sees which through /proc/1/exe,
// and --dry-run names it.
func TestInitBinaryPair(t *testing.T) {
	needBwrap(t)
	w := sandboxtest.WorkDir(t)
	// pid1 is the binary PID 1 runs, as the command sees it; --dry-run
	// must name the same one.
	pid1 := func(sbx string) string {
		t.Helper()
		r := runBin(t, sbx, nil, "", "run", "--workdir", w, "--allow-host", "example.com", "--", "readlink", "/proc/1/exe")
		if r.code != 0 {
			t.Fatalf("%s: exit %d: %s", sbx, r.code, r.stderr)
		}
		exe := strings.TrimSpace(r.stdout)
		dry := runBin(t, sbx, nil, "", "run", "--workdir", w, "--allow-host", "example.com", "--dry-run", "--", "true")
		if want := "\n  7 = " + exe + " (init)\n"; !strings.Contains(dry.stdout, want) {
			t.Errorf("--dry-run does not name init %s (%q):\n%s", exe, want, dry.stdout)
		}
		return exe
	}
	if got := pid1(bin); got != bin+"-init" {
		t.Fatalf("PID 1 runs %q, want %s-init", got, bin)
	}

	// A copy of the pair whose sandbox-run-init is then replaced.
	dir := sandboxtest.WorkDir(t) // reachable by the sandbox's uid
	if os.Geteuid() == 0 {
		os.Chown(dir, 0, 0) // and not writable by it
	}
	sbx := filepath.Join(dir, "sandbox-run")
	sandboxtest.CopyExecutable(t, bin, sbx)
	sandboxtest.CopyExecutable(t, bin+"-init", sbx+"-init")
	if got := pid1(sbx); got != sbx+"-init" {
		t.Fatalf("untested: the copied pair runs %q as init, not its sandbox-run-init", got)
	}
	sandboxtest.CopyExecutable(t, bin, sbx+"-init") // a Go binary of another build
	if got := pid1(sbx); got != sbx {
		t.Errorf("with another build beside it, PID 1 runs %q, want sandbox-run itself %s", got, sbx)
	}
	os.Remove(sbx + "-init")
	if got := pid1(sbx); got != sbx {
		t.Errorf("with no sandbox-run-init beside it, PID 1 runs %q, want sandbox-run itself %s", got, sbx)
	}
}
