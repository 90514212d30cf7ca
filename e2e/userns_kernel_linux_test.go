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

// usernsOffBy returns the sysctl that disables user namespaces for this
// user ("" when none does): user.max_user_namespaces=0 for everyone,
// Debian's kernel.unprivileged_userns_clone=0 for users without
// CAP_SYS_ADMIN.
func usernsOffBy() string {
	read := func(p string) string {
		b, _ := os.ReadFile(p)
		return strings.TrimSpace(string(b))
	}
	switch {
	case read("/proc/sys/user/max_user_namespaces") == "0":
		return "user.max_user_namespaces"
	case read("/proc/sys/kernel/unprivileged_userns_clone") == "0" && os.Geteuid() != 0:
		return "kernel.unprivileged_userns_clone"
	}
	return ""
}

// TestUsernsDisabled: on a kernel whose sysctl disables user namespaces,
// run exits 125 naming the sysctl and its fix, and never runs the command
// in a weaker sandbox; check reports tier 0 with the same cause. make
// test-vm runs it as an unprivileged user with each sysctl in turn.
func TestUsernsDisabled(t *testing.T) {
	sysctl := usernsOffBy()
	if sysctl == "" {
		sandboxtest.KernelUnavailable(t, sandboxtest.RequireUsernsOffEnv, "user namespaces disabled by a sysctl",
			"user.max_user_namespaces and kernel.unprivileged_userns_clone allow them here")
		return
	}
	// The premise, checked without sandbox-run: this user cannot create a
	// user namespace.
	if out, err := exec.Command("unshare", "--user", "true").CombinedOutput(); err == nil {
		t.Fatalf("%s says user namespaces are off, but unshare --user worked: %q", sysctl, out)
	}
	w := sandboxtest.WorkDir(t)
	marker := filepath.Join(w, "ran")
	r := run(t, "", "run", "--workdir", w, "--", "touch", marker)
	oneLine(t, r, sysctl, "fix:", "sysctl -w "+sysctl)
	if _, err := os.Stat(marker); err == nil {
		t.Errorf("the command ran although user namespaces are off")
	}

	c := run(t, "", "check", "--json")
	var rep struct {
		Tier    int    `json:"tier"`
		Verdict string `json:"verdict"`
		Checks  []struct {
			ID, Status, Summary, Remediation string
		} `json:"checks"`
	}
	if err := json.Unmarshal([]byte(c.stdout), &rep); err != nil {
		t.Fatalf("check --json: %v (exit %d, %q)", err, c.code, c.stderr)
	}
	if rep.Tier != 0 || c.code != 1 {
		t.Errorf("check: tier %d exit %d, want tier 0 exit 1 (%s)", rep.Tier, c.code, rep.Verdict)
	}
	found := false
	for _, it := range rep.Checks {
		if it.ID == "userns" {
			found = true
			if it.Status != "fail" || !strings.Contains(it.Summary, sysctl) || !strings.Contains(it.Remediation, sysctl) {
				t.Errorf("check's userns item: %+v, want fail naming %s and its fix", it, sysctl)
			}
		}
	}
	if !found {
		t.Errorf("check has no userns item: %s", c.stdout)
	}
}
