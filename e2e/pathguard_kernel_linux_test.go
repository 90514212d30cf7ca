package e2e

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sandbox-run/sandbox-run/internal/sandboxtest"
)

// TestTwoSessionAttack: run 1 swaps W/sub for a link to a sibling dir; run 2
// asking for --read W/sub must be refused, not handed the sibling.
func TestTwoSessionAttack(t *testing.T) {
	bw := sandboxtest.Bwrap(t)
	w := sandboxtest.WorkDir(t)
	sibling := sandboxtest.WorkDir(t)
	os.WriteFile(filepath.Join(sibling, "flag"), []byte("SIBLING-FLAG"), 0o644)
	os.Mkdir(filepath.Join(w, "sub"), 0o755)
	sandboxtest.Chown(t, filepath.Join(w, "sub"))

	// Run 1, sandboxed: the command may do this inside its own workdir.
	r := sandboxed(t, w, "rm -rf sub && ln -s "+sibling+" sub && echo swapped")
	if !strings.Contains(r.stdout, "swapped") {
		t.Fatalf("run 1 could not plant the link: %q %q", r.stdout, r.stderr)
	}
	// Positive control: a bind that follows the planted link by path reads
	// the sibling's flag.
	out, _ := exec.Command(bw, "--unshare-user", "--ro-bind", "/", "/", "--ro-bind", filepath.Join(w, "sub"), "/mnt",
		"--", "cat", "/mnt/flag").CombinedOutput()
	if !strings.Contains(string(out), "SIBLING-FLAG") {
		t.Fatalf("control: following the link did not reach the sibling (untested): %q", out)
	}
	// Run 2 (a later session, another workdir) names the path in W.
	w2 := sandboxtest.WorkDir(t)
	r = run(t, "", "run", "--workdir", w2, "--write", w, "--read", filepath.Join(w, "sub"), "--", "cat", filepath.Join(w, "sub", "flag"))
	oneLine(t, r, filepath.Join(w, "sub"), w, "fix")
	if strings.Contains(r.stdout, "SIBLING-FLAG") {
		t.Errorf("run 2 read the sibling's flag")
	}
}

// TestDestinationAttack: W/.git/hooks replaced by a link to /etc before the
// run must be refused, not mounted onto /etc.
func TestDestinationAttack(t *testing.T) {
	needBwrap(t)
	w := sandboxtest.WorkDir(t)
	os.Mkdir(filepath.Join(w, ".git"), 0o755)
	sandboxtest.Chown(t, filepath.Join(w, ".git"))
	if err := os.Symlink("/etc", filepath.Join(w, ".git", "hooks")); err != nil {
		t.Fatal(err)
	}
	r := sandboxed(t, w, "echo ran")
	oneLine(t, r, filepath.Join(w, ".git", "hooks"), "/etc")
	if strings.Contains(r.stdout, "ran") {
		t.Errorf("the command ran")
	}
}

// TestWritableThroughLinkInWritable: a --write dir reached through a link
// that sits in the workdir is refused.
func TestWritableThroughLinkInWritable(t *testing.T) {
	needBwrap(t)
	w := sandboxtest.WorkDir(t)
	other := sandboxtest.WorkDir(t)
	link := filepath.Join(w, "out")
	os.Symlink(other, link)
	r := run(t, "", "run", "--workdir", w, "--write", link, "--", "true")
	oneLine(t, r, link, w)
}

// TestReadInsideWritableRefused: a read-only bind inside a writable dir is
// refused whatever it is, since the sandbox could replace it.
func TestReadInsideWritableRefused(t *testing.T) {
	needBwrap(t)
	w := sandboxtest.WorkDir(t)
	os.WriteFile(filepath.Join(w, "f"), nil, 0o644)
	r := run(t, "", "run", "--workdir", w, "--read", filepath.Join(w, "f"), "--", "true")
	oneLine(t, r, filepath.Join(w, "f"), w)
}

// TestReadBindWorks: an ordinary --read outside the writable set is
// visible read-only, bound by descriptor.
func TestReadBindWorks(t *testing.T) {
	needBwrap(t)
	w := sandboxtest.WorkDir(t)
	ro := sandboxtest.WorkDir(t)
	os.WriteFile(filepath.Join(ro, "data"), []byte("RO-DATA"), 0o644)
	rep := filepath.Join(sandboxtest.WorkDir(t), "r.json")
	r := run(t, "", "run", "--workdir", w, "--read", ro, "--report", rep, "--", "sh", "-c",
		"cat "+ro+"/data; echo x > "+ro+"/data 2>/dev/null && echo WROTE; true")
	if r.code != 0 || !strings.Contains(r.stdout, "RO-DATA") || strings.Contains(r.stdout, "WROTE") {
		t.Errorf("--read: exit %d out %q err %q", r.code, r.stdout, r.stderr)
	}
	b, _ := os.ReadFile(rep)
	if !strings.Contains(string(b), `"binds_by_fd": true`) {
		t.Errorf("report does not say binds are made by descriptor:\n%s", b)
	}
}
