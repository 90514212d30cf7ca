package e2e

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"

	"github.com/sandbox-run/sandbox-run/internal/sandboxtest"
)

// TestMapOwner: root in its own directory. Without --map-owner the write
// is refused (exit 125, the refusal names the flag); with it the command
// still runs as uid 65534, its files are root's on the host, a root-only
// file outside the workdir stays unreadable, set-ID bits are refused
// (control: the same chmod passes in a directory the sandbox uid owns),
// and nothing is left mounted or in /run/sandbox-run.
func TestMapOwner(t *testing.T) {
	sandboxtest.Root(t)
	needBwrap(t)
	w := sandboxtest.WorkDir(t)
	if err := os.Chown(w, 0, 0); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(w, "f"), []byte("hi\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	outside := sandboxtest.WorkDir(t)
	if err := os.Chown(outside, 0, 0); err != nil {
		t.Fatal(err)
	}
	secret := filepath.Join(outside, "secret")
	if err := os.WriteFile(secret, []byte("root only\n"), 0o600); err != nil {
		t.Fatal(err)
	}

	// Control: refused, and the refusal names the flag.
	oneLine(t, sandboxed(t, w, "touch x"), "not writable for uid 65534", "--map-owner")

	mountsBefore := mountsOf(t, w)
	runBefore := dirNames(t, "/run/sandbox-run")
	r := sandboxed(t, w, `id -u; touch new; echo more >> f; cat `+secret+` && echo LEAK
cp /bin/true t; chmod 4755 t; echo chmod=$?; chmod 2755 t; echo chmod2=$?`, "--map-owner", "--read", outside, "--summary")
	if r.code != 0 {
		t.Fatalf("exit %d; stderr: %s", r.code, r.stderr)
	}
	if !strings.Contains(r.stderr, "--map-owner: "+w) {
		t.Errorf("the summary does not say the owner was lent: %s", r.stderr)
	}
	lines := strings.Split(strings.TrimSpace(r.stdout), "\n")
	if lines[0] != "65534" {
		t.Errorf("id -u inside = %q, want 65534 (never 0)", lines[0])
	}
	if strings.Contains(r.stdout, "LEAK") || strings.Contains(r.stdout, "root only") {
		t.Errorf("the root-only file outside the workdir was read: %q", r.stdout)
	}
	for _, want := range []string{"chmod=1", "chmod2=1"} {
		if !slices.Contains(lines, want) {
			t.Errorf("stdout %q lacks %q: a set-ID bit was set", r.stdout, want)
		}
	}
	if b, _ := os.ReadFile(filepath.Join(w, "f")); string(b) != "hi\nmore\n" {
		t.Errorf("f = %q, want the command's append", b)
	}
	for _, name := range []string{"new", "t", "f"} {
		var st syscall.Stat_t
		if err := syscall.Stat(filepath.Join(w, name), &st); err != nil {
			t.Fatal(err)
		}
		if st.Uid != 0 || st.Gid != 0 {
			t.Errorf("%s is %d:%d on the host, want 0:0 (the directory's owner)", name, st.Uid, st.Gid)
		}
		if st.Mode&(syscall.S_ISUID|syscall.S_ISGID) != 0 {
			t.Errorf("%s has a set-ID bit on the host: %o", name, st.Mode)
		}
	}
	if got := dirNames(t, w); !slices.Equal(got, []string{"f", "new", "t"}) {
		t.Errorf("workdir holds %v, want only the command's files", got)
	}
	if got := mountsOf(t, w); got != mountsBefore {
		t.Errorf("mounts on %s after the run: %d, before: %d", w, got, mountsBefore)
	}
	if got := dirNames(t, "/run/sandbox-run"); !slices.Equal(got, runBefore) {
		t.Errorf("/run/sandbox-run holds %v after the run, %v before", got, runBefore)
	}

	// Control for the set-ID rules: in a directory the sandbox uid owns,
	// without --map-owner, the same chmod passes.
	own := sandboxtest.WorkDir(t)
	c := sandboxed(t, own, "cp /bin/true t; chmod 4755 t; echo chmod=$?")
	if c.code != 0 || !strings.Contains(c.stdout, "chmod=0") {
		t.Errorf("control: chmod 4755 without --map-owner: exit %d, stdout %q, stderr %s", c.code, c.stdout, c.stderr)
	}
}

// mountsOf counts the host's mounts at or under dir.
func mountsOf(t *testing.T, dir string) int {
	t.Helper()
	b, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, l := range strings.Split(string(b), "\n") {
		if f := strings.Fields(l); len(f) > 4 && (f[4] == dir || strings.HasPrefix(f[4], dir+"/")) {
			n++
		}
	}
	return n
}

// dirNames lists dir's entries, sorted; none when it does not exist.
func dirNames(t *testing.T, dir string) []string {
	t.Helper()
	ents, err := os.ReadDir(dir)
	if err != nil && !os.IsNotExist(err) {
		t.Fatal(err)
	}
	var names []string
	for _, e := range ents {
		names = append(names, e.Name())
	}
	return names
}
