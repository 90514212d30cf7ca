package bwrap

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/sandbox-run/sandbox-run/pathguard"
)

// fdDeleted reports whether the file behind fd has lost its name: what
// bwrap before 0.9 cannot bind, since it resolves /proc/self/fd/N first.
func fdDeleted(t *testing.T, fd int) bool {
	t.Helper()
	l, err := os.Readlink(fmt.Sprintf("/proc/self/fd/%d", fd))
	if err != nil {
		t.Fatal(err)
	}
	return strings.HasSuffix(l, " (deleted)")
}

// TestGitHintSourceParallel has parallel first runs publish the wrapper
// while each holds what it got open, as a run holds its bind: no run's
// file may lose its name. The control replaces the file by rename, as
// the wrapper once was published, and must orphan the file held open.
func TestGitHintSourceParallel(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "bin")
	const n = 16
	var wg sync.WaitGroup
	fds := make([]int, n)
	errs := make([]error, n)
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			path, err := publishGitHint(pathguard.NewResolver(), dir, 0o700) // a Resolver per run, as runs have
			if err != nil {
				errs[i] = err
				return
			}
			fds[i], errs[i] = unix.Open(path, unix.O_PATH|unix.O_CLOEXEC, 0)
		}()
	}
	wg.Wait()
	for i := range n {
		if errs[i] != nil {
			t.Fatalf("run %d: %v", i, errs[i])
		}
		defer unix.Close(fds[i])
	}
	for i := range n {
		if fdDeleted(t, fds[i]) {
			t.Errorf("run %d: the wrapper it holds was replaced under it", i)
		}
	}
	if ents, _ := os.ReadDir(dir); len(ents) != 1 {
		t.Errorf("%s holds %d files, want the wrapper alone (no temporary file left)", dir, len(ents))
	}

	// Control: publish by rename over the name a run holds open.
	held := filepath.Join(t.TempDir(), "git-hint")
	if err := os.WriteFile(held, []byte(gitHintScript), 0o755); err != nil {
		t.Fatal(err)
	}
	fd, err := unix.Open(held, unix.O_PATH|unix.O_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(fd)
	if err := os.WriteFile(held+".new", []byte(gitHintScript), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(held+".new", held); err != nil {
		t.Fatal(err)
	}
	if !fdDeleted(t, fd) {
		t.Fatal("control: a rename over the held file did not orphan it; the check above proves nothing")
	}
}
