package hostnet

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sandbox-run/sandbox-run/internal/procid"
	"github.com/sandbox-run/sandbox-run/internal/sandboxtest"
)

func init() {
	helpers["hold-dirs"] = helperHoldDirs
}

// helperHoldDirs makes, in $TMPDIR, a run directory as a run does
// (MakeRunDir: held) and one named as before the lock (unheld), each with
// something inside, prints their paths, and waits for stdin to close
// without removing them: a run until it is killed.
func helperHoldDirs() int {
	me, _, err := procid.Self()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	held, _, err := MakeRunDir(nsPrefix, me)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	unheld, err := os.MkdirTemp("", RunDirPattern(nsPrefix, me))
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	for _, d := range []string{held, unheld} {
		if err := os.MkdirAll(filepath.Join(d, "sub"), 0o700); err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
	}
	fmt.Println(held)
	fmt.Println(unheld)
	io.Copy(io.Discard, os.Stdin)
	return 0
}

// TestSweepRunKilledInGonePIDNamespace: a run killed in a pid namespace
// that is then gone (a container sharing TMPDIR torn down) leaves its
// held directory (MakeRunDir), and the next sweep removes it, judged by
// its lock: the host cannot judge its pid. While that run lives, in its
// live namespace, the sweep keeps the directory, and it keeps the
// directory of a live run of its own namespace throughout.
//
// Controls, that the test can fail: the same run's unheld directory,
// named as every directory was before the lock and so judged by its pid
// alone, is kept after the namespace is gone (the gap the lock closes);
// and the held one is kept while the test holds its lock itself, so the
// lock is what decides.
func TestSweepRunKilledInGonePIDNamespace(t *testing.T) {
	tmp := t.TempDir()
	c := inPIDNamespace(t, "hold-dirs", true)
	c.Env = append(c.Env, "TMPDIR="+tmp)
	stdin, err := c.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := c.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Start(); err != nil {
		t.Fatal(err)
	}
	defer c.Wait()
	defer stdin.Close()
	r := bufio.NewReader(stdout)
	held, err1 := r.ReadString('\n')
	unheld, err2 := r.ReadString('\n')
	if err1 != nil || err2 != nil {
		t.Fatalf("helper: %v %v", err1, err2)
	}
	held, unheld = strings.TrimSpace(held), strings.TrimSpace(unheld)
	if !strings.Contains(filepath.Base(held), "-"+heldMark) || strings.Contains(filepath.Base(unheld), "-"+heldMark) {
		t.Fatalf("held %s, unheld %s: want the mark on the first only", held, unheld)
	}
	t.Setenv("TMPDIR", tmp)
	me, _, err := procid.Self()
	if err != nil {
		t.Fatal(err)
	}
	own, release, err := MakeRunDir(nsPrefix, me)
	if err != nil {
		t.Fatal(err)
	}
	defer release()

	sweep := func() { sweepRunDirs(tmp, nsPrefix, os.Geteuid()) }
	sweep()
	keptAll(t, "the run lives in its namespace", held, unheld, own)

	sandboxtest.EndPIDNamespace(t, c)
	d, err := os.Open(tmp)
	if err != nil {
		t.Fatal(err)
	}
	unhold, ok := procid.HoldAt(int(d.Fd()), filepath.Base(held))
	d.Close()
	if !ok {
		t.Fatalf("cannot lock %s", held)
	}
	sweep()
	keptAll(t, "control, the test holds the killed run's lock", held)
	unhold()

	sweep()
	if _, err := os.Lstat(held); err == nil {
		t.Errorf("the held directory %s of a run killed in a pid namespace now gone was kept", filepath.Base(held))
	}
	keptAll(t, "control, the namespace is gone, unheld", unheld)
	keptAll(t, "the sweep's own namespace's live run", own)
}

// keptAll fails t for each of paths that is gone, saying when.
func keptAll(t *testing.T, when string, paths ...string) {
	t.Helper()
	for _, p := range paths {
		if _, err := os.Lstat(p); err != nil {
			t.Errorf("%s: %s was swept: %v", when, filepath.Base(p), err)
		}
	}
}

// TestSweepHeldRunDirs: the run of a held name (the mark) whose pid this
// process cannot judge (another namespace's token) is judged by the lock:
// the directory goes when the lock is free, stays while it is held. An
// unheld name of that namespace stays whatever its lock (a directory made
// but not yet held, or an older version's), and so does another owner's;
// a held name that is a link is neither followed nor probed, and what it
// points at stays.
func TestSweepHeldRunDirs(t *testing.T) {
	tmp := t.TempDir()
	other := procid.ID{PID: 1, Start: 1, NS: "1"} // no namespace has inode 1
	base := RunDirPattern(nsPrefix, other)
	mk := func(name string) string {
		p := filepath.Join(tmp, name)
		if err := os.MkdirAll(filepath.Join(p, "sub"), 0o700); err != nil {
			t.Fatal(err)
		}
		return p
	}
	free := mk(base + heldMark + "1")
	held := mk(base + heldMark + "2")
	unheld := mk(base + "3")
	target := mk("elsewhere")
	link := filepath.Join(tmp, base+heldMark+"4")
	if err := os.Symlink(target, link); err != nil {
		t.Fatal(err)
	}
	d, err := os.Open(tmp)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	release, ok := procid.HoldAt(int(d.Fd()), filepath.Base(held))
	if !ok {
		t.Fatal("cannot lock", held)
	}
	defer release()

	sweepRunDirs(tmp, nsPrefix, os.Geteuid()+1)
	keptAll(t, "control, another owner's", free)

	sweepRunDirs(tmp, nsPrefix, os.Geteuid())
	if _, err := os.Lstat(free); err == nil {
		t.Errorf("%s, held by no one, was kept", filepath.Base(free))
	}
	keptAll(t, "the sweep", held, unheld, link, filepath.Join(target, "sub"))
}
