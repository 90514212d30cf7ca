package e2e

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sandbox-run/sandbox-run/filter"
	"github.com/sandbox-run/sandbox-run/internal/sandboxtest"
)

// TestFilterInForce: the report names the filter that was installed and the
// kernel's own view from inside; nested user namespaces are refused.
func TestFilterInForce(t *testing.T) {
	needBwrap(t)
	w := sandboxtest.WorkDir(t)
	rep := filepath.Join(sandboxtest.WorkDir(t), "r.json")
	// Positive control: unconfined, unshare -U works on this machine.
	if out, err := exec.Command("unshare", "-U", "true").CombinedOutput(); err != nil {
		t.Fatalf("control: unshare -U fails unconfined (untested): %v %s", err, out)
	}
	r := run(t, "", "run", "--workdir", w, "--report", rep, "--", "sh", "-c", "unshare -U true 2>/dev/null && echo NESTED-USERNS; true")
	if r.code != 0 || strings.Contains(r.stdout, "NESTED-USERNS") {
		t.Errorf("nested user namespace: exit %d out %q", r.code, r.stdout)
	}
	var report struct {
		Seccomp struct {
			Digest   string `json:"digest"`
			Readback int    `json:"readback_mode"`
		} `json:"seccomp"`
	}
	b, _ := os.ReadFile(rep)
	if err := json.Unmarshal(b, &report); err != nil {
		t.Fatal(err)
	}
	arch, _ := filter.NativeArch()
	prog, _ := filter.Assemble(arch, filter.Options{})
	if report.Seccomp.Digest != prog.Digest() || report.Seccomp.Readback != 2 {
		t.Errorf("report seccomp = %+v, want digest %s and read-back mode 2", report.Seccomp, prog.Digest())
	}
}

// TestOrdinaryWorkUnderSandbox: what agents do every day still works.
func TestOrdinaryWorkUnderSandbox(t *testing.T) {
	needBwrap(t)
	w := sandboxtest.WorkDir(t)
	script := `set -e
python3 -c 'print("py-ok")'
mkdir repo && cd repo
git init -q . && echo hi > f && git add f
git -c user.name=t -c user.email=t@e commit -qm one && echo git-ok`
	r := sandboxed(t, w, script)
	if r.code != 0 || !strings.Contains(r.stdout, "py-ok") || !strings.Contains(r.stdout, "git-ok") {
		t.Errorf("exit %d out %q err %q", r.code, r.stdout, r.stderr)
	}
}
