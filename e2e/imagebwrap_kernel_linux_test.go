package e2e

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sandbox-run/sandbox-run/internal/sandboxtest"
)

// TestImageBwrap: --image with --sandbox bwrap is tier 1 over the image's
// tree: the command sees the image's files and not the host's /usr/bin,
// writes the workdir, and the report says tier 1, bwrap and the image's
// digest. Control: the same run without --image sees the host's tree. As
// root too: the tree is unpacked where the sandbox's uid may reach it.
func TestImageBwrap(t *testing.T) {
	sandboxtest.Bwrap(t)
	img := sandboxtest.BusyboxImage(t, nil)
	w := sandboxtest.WorkDir(t)
	rep := filepath.Join(t.TempDir(), "report.json")
	script := "cat /etc/image-marker; test -e /usr/bin/env && echo host-usr; echo made > out.txt"
	args := []string{"run", "--workdir", w, "--sandbox", "bwrap", "--report", rep, "--image", img.Ref, "--", "sh", "-c", script}
	r := runEnv(t, imageEnv(t), "", args...)
	if r.code != 0 || !strings.Contains(r.stdout, "busybox test image") || strings.Contains(r.stdout, "host-usr") {
		t.Fatalf("exit %d, stdout %q, stderr %q", r.code, r.stdout, r.stderr)
	}
	if b, err := os.ReadFile(filepath.Join(w, "out.txt")); err != nil || string(b) != "made\n" {
		t.Errorf("the workdir was not written: %q %v", b, err)
	}
	var report struct {
		Tier      int    `json:"tier"`
		Mechanism string `json:"mechanism"`
		Image     *struct{ Reference, Digest string }
	}
	b, err := os.ReadFile(rep)
	if err != nil || json.Unmarshal(b, &report) != nil {
		t.Fatalf("report: %v %s", err, b)
	}
	if report.Tier != 1 || report.Mechanism != "bwrap" || report.Image == nil || report.Image.Digest != img.Digest || report.Image.Reference != img.Ref {
		t.Errorf("report: tier %d, mechanism %q, image %+v; want 1, bwrap, %s %s", report.Tier, report.Mechanism, report.Image, img.Ref, img.Digest)
	}
	ctl := run(t, "", "run", "--workdir", w, "--sandbox", "bwrap", "--", "sh", "-c", script)
	if ctl.code != 0 || !strings.Contains(ctl.stdout, "host-usr") || strings.Contains(ctl.stdout, "busybox test image") {
		t.Errorf("control without --image: exit %d, stdout %q, stderr %q", ctl.code, ctl.stdout, ctl.stderr)
	}
}
