package e2e

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sandbox-run/sandbox-run/internal/sandboxtest"
)

// TestImageCheck: check --sandbox gvisor --json says whether --image can
// run here. With runsc and podman it is isolation.gvisor=ready; controls:
// with only runsc on PATH it names podman and its fix, with only podman it
// is not ready and points at tier 2.
func TestImageCheck(t *testing.T) {
	sandboxtest.Runsc(t)
	podman, err := exec.LookPath("podman")
	if err != nil {
		sandboxtest.Unavailable(t, "podman", "apt-get install -y podman (scripts/install-deps.sh)")
	}
	if out, err := exec.Command(podman, "image", "ls", "--quiet").CombinedOutput(); err != nil {
		sandboxtest.Unavailable(t, "podman's storage for this user", "make podman work for this user: "+string(out))
	}
	runsc, err := exec.LookPath("runsc")
	if err != nil {
		sandboxtest.Unavailable(t, "runsc on PATH", "apt-get install -y runsc (scripts/install-deps.sh)")
	}
	// only is a PATH of one directory holding a link to each of tools.
	only := func(tools ...string) string {
		d := t.TempDir()
		for _, p := range tools {
			if err := os.Symlink(p, filepath.Join(d, filepath.Base(p))); err != nil {
				t.Fatal(err)
			}
		}
		return "PATH=" + d
	}
	images := func(env ...string) checkRemedied {
		t.Helper()
		r := runEnv(t, env, "", "check", "--sandbox", "gvisor", "--json")
		var rep struct{ Checks []checkRemedied }
		if err := json.Unmarshal([]byte(r.stdout), &rep); err != nil {
			t.Fatalf("check --json %v: %v (exit %d, %q)", env, err, r.code, r.stderr)
		}
		for _, it := range rep.Checks {
			if it.ID == "images" {
				return it
			}
		}
		t.Fatalf("check --json %v has no images item: %s", env, r.stdout)
		return checkRemedied{}
	}
	if it := images(); it.Status != "ok" || !strings.HasPrefix(it.Summary, "isolation.gvisor=ready") {
		t.Errorf("with runsc and podman: %+v", it)
	}
	if it := images(only(runsc)); it.Status != "warn" || !strings.Contains(it.Summary, "isolation.gvisor=unavailable: no podman") || !strings.Contains(it.Remediation, "apt-get install -y podman") {
		t.Errorf("without podman on PATH: %+v", it)
	}
	if it := images(only(podman)); it.Status != "warn" || !strings.Contains(it.Summary, "isolation.gvisor=unavailable") || !strings.Contains(it.Summary, "tier 2 does not run here") || it.Remediation == "" {
		t.Errorf("without runsc on PATH: %+v", it)
	}
}

// checkRemedied is a check --json item with its fix.
type checkRemedied struct {
	ID, Status, Summary, Remediation string
}
