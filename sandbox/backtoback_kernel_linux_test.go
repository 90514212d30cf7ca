package sandbox

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/sandbox-run/sandbox-run/internal/mechanism"
	"github.com/sandbox-run/sandbox-run/internal/sandboxtest"
	"github.com/sandbox-run/sandbox-run/policy"
)

// leakCounts is what a run could leave behind in the process that called
// Run: descriptors, mounts, goroutines, runtime directories in TMPDIR and
// processes (children of ours, or anything that carries the marker).
type leakCounts struct {
	fds, mounts, goroutines, tmpEntries, children, marked int
}

// countLeaks counts what is left now. Mounts are counted only where a run
// could leave one in this namespace (under TMPDIR or the workdir): other
// tests on the machine mount and unmount elsewhere meanwhile.
func countLeaks(t *testing.T, tmp, marker string, dirs ...string) leakCounts {
	t.Helper()
	fds, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Fatal(err)
	}
	mi, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		t.Fatal(err)
	}
	ents, err := os.ReadDir(tmp)
	if err != nil {
		t.Fatal(err)
	}
	c := leakCounts{fds: len(fds), goroutines: runtime.NumGoroutine(), tmpEntries: len(ents)}
	for _, line := range strings.Split(string(mi), "\n") {
		// id parent major:minor root mountpoint ...
		if f := strings.Fields(line); len(f) > 4 {
			for _, d := range append(dirs, tmp) {
				if f[4] == d || strings.HasPrefix(f[4], d+"/") {
					c.mounts++
					break
				}
			}
		}
	}
	procs, _ := os.ReadDir("/proc")
	self := fmt.Sprint(os.Getpid())
	for _, e := range procs {
		if e.Name()[0] < '0' || e.Name()[0] > '9' {
			continue
		}
		if st, err := os.ReadFile(filepath.Join("/proc", e.Name(), "stat")); err == nil {
			// pid (comm) state ppid ...: comm may hold spaces, so split
			// after its closing parenthesis.
			if f := strings.Fields(string(st[bytes.LastIndexByte(st, ')')+1:])); len(f) > 1 && f[1] == self {
				c.children++
			}
		}
		if cl, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline")); err == nil && bytes.Contains(cl, []byte(marker)) {
			c.marked++
		}
	}
	return c
}

// settle polls until the counts equal base (goroutines may take a moment
// to finish) or two seconds pass, and returns the last counts.
func settle(t *testing.T, tmp, marker string, base leakCounts, dirs ...string) leakCounts {
	t.Helper()
	var c leakCounts
	for deadline := time.Now().Add(2 * time.Second); ; {
		c = countLeaks(t, tmp, marker, dirs...)
		if c.within(base) || time.Now().After(deadline) {
			return c
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestBackToBackLeavesNothing runs 200 sandboxes one after another, through
// every launch path (bwrap's own PID 1; sandbox-run's init for a network or
// an rlimit; a command that cannot start), and checks that the process
// that ran them is back where it started: no descriptor, mount, goroutine,
// runtime directory or process more.
func TestBackToBackLeavesNothing(t *testing.T) {
	sandboxtest.Bwrap(t)
	const runs = 200
	cache := t.TempDir()
	// TMPDIR must be searchable by the sandbox's uid (the built-in proxy's
	// socket lives there); t.TempDir is not, as root.
	tmp := sandboxtest.WorkDir(t)
	t.Setenv("TMPDIR", tmp)
	w := sandboxtest.WorkDir(t)
	marker := "sbx-b2b-" + mechanism.NewRunID()
	null, err := os.Open(os.DevNull)
	if err != nil {
		t.Fatal(err)
	}
	defer null.Close()
	opts := Options{Stdin: null, Stdout: null, Stderr: null, BwrapCache: cache}
	kinds := []struct {
		name string
		p    policy.Policy
		cmd  []string
		code int
	}{
		{"fast path", policy.Policy{Workdir: w}, []string{"/bin/sh", "-c", "echo x > f", marker}, 0},
		{"init with a network", policy.Policy{Workdir: w, AllowHosts: []string{"example.com"}}, []string{"/bin/sh", "-c", "test -n \"$HTTP_PROXY\"", marker}, 0},
		{"init with an rlimit", policy.Policy{Workdir: w, NoFile: 64}, []string{"/bin/sh", "-c", "exit 3", marker}, 3},
		{"command not found", policy.Policy{Workdir: w}, []string{"/nonexistent-" + marker}, 127},
	}
	// The first run of each kind warms what is meant to stay (the bwrap
	// detection cache, the runtime's threads).
	for _, k := range kinds {
		if res, err := Run(t.Context(), k.p, k.cmd, opts); res == nil {
			t.Fatalf("%s: %v", k.name, err)
		}
	}
	base := settle(t, tmp, marker, countLeaks(t, tmp, marker, w), w)
	if base.tmpEntries != 0 || base.children != 0 || base.marked != 0 {
		t.Fatalf("the first runs left something behind: %+v", base)
	}

	// Control: each count sees what it is meant to catch.
	f, _ := os.Open(os.DevNull)
	d, _ := os.MkdirTemp(tmp, "sandbox-run-")
	sleeper := exec.Command("/bin/sh", "-c", "sleep 30; :", marker)
	if err := sleeper.Start(); err != nil {
		t.Fatal(err)
	}
	mounted := 0
	if os.Geteuid() == 0 {
		mnt := filepath.Join(w, "control-mount")
		os.Mkdir(mnt, 0o755)
		if err := exec.Command("mount", "-t", "tmpfs", "-o", "size=64k", "tmpfs", mnt).Run(); err != nil {
			t.Fatalf("control mount: %v", err)
		}
		defer os.Remove(mnt)
		defer exec.Command("umount", mnt).Run()
		mounted = 1
	}
	// The shell shows the marker (its $0) once it runs; while it forks
	// sleep, the child is a copy that shows it too, until it execs: wait
	// for exactly one.
	c := countLeaks(t, tmp, marker, w)
	for deadline := time.Now().Add(2 * time.Second); c.marked != base.marked+1 && time.Now().Before(deadline); {
		time.Sleep(5 * time.Millisecond)
		c = countLeaks(t, tmp, marker, w)
	}
	if mounted == 1 {
		exec.Command("umount", filepath.Join(w, "control-mount")).Run()
	}
	f.Close()
	os.Remove(d)
	sleeper.Process.Kill()
	sleeper.Wait()
	if c.fds <= base.fds || c.tmpEntries != base.tmpEntries+1 || c.children != base.children+1 || c.marked != base.marked+1 || c.mounts != base.mounts+mounted {
		t.Fatalf("control: the counts missed a descriptor, directory or process made on purpose: base %+v, with them %+v", base, c)
	}

	start := time.Now()
	for i := range runs {
		k := kinds[i%len(kinds)]
		res, err := Run(t.Context(), k.p, k.cmd, opts)
		if res == nil {
			t.Fatalf("run %d (%s): %v", i, k.name, err)
		}
		if res.ExitCode != k.code {
			t.Fatalf("run %d (%s): exit %d, want %d (%v)", i, k.name, res.ExitCode, k.code, err)
		}
	}
	elapsed := time.Since(start)
	after := settle(t, tmp, marker, base, w)
	t.Logf("%d runs in %v (%v each); before %+v, after %+v", runs, elapsed.Round(time.Millisecond), (elapsed / runs).Round(100*time.Microsecond), base, after)
	if !after.within(base) {
		ents, _ := os.ReadDir(tmp)
		t.Errorf("leaked: before %+v, after %+v (TMPDIR holds %d entries)", base, after, len(ents))
	}
}

// within says c holds nothing more than base: the same counts, but for
// goroutines, of which fewer is no leak (one an earlier test left running
// may end while the runs go on).
func (c leakCounts) within(base leakCounts) bool {
	if c.goroutines < base.goroutines {
		c.goroutines = base.goroutines
	}
	return c == base
}
