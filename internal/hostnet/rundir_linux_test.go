package hostnet

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/sandbox-run/sandbox-run/internal/procid"
)

// TestSweepRunDirs: a run directory whose process is gone is removed; one
// whose process runs, one of another owner, a link, a file and a name of
// another prefix are kept; one call removes at most 64, and startSweep's
// wait returns once the sweep is done.
func TestSweepRunDirs(t *testing.T) {
	tmp := t.TempDir()
	// A process that has ended: its pid and start time name no process.
	c := exec.Command("true")
	if err := c.Start(); err != nil {
		t.Fatal(err)
	}
	deadPID := c.Process.Pid
	deadStart, err := procid.Start(deadPID)
	if err != nil {
		deadStart = 1 // ended already: any start time names no process
	}
	c.Wait()
	me, _, err := procid.Self()
	if err != nil {
		t.Fatal(err)
	}
	const prefix = "sandbox-run-test-"
	mk := func(name string) string {
		p := filepath.Join(tmp, name)
		if err := os.MkdirAll(filepath.Join(p, "sub"), 0o700); err != nil {
			t.Fatal(err)
		}
		return p
	}
	dead := mk(fmt.Sprintf("%s%d.%d-x", prefix, deadPID, deadStart))
	live := mk(RunDirPattern(prefix, me) + "y")
	other := mk(fmt.Sprintf("other-%d.%d-z", deadPID, deadStart))
	link := filepath.Join(tmp, fmt.Sprintf("%s%d.%d-l", prefix, deadPID, deadStart))
	if err := os.Symlink(live, link); err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(tmp, fmt.Sprintf("%s%d.%d-f", prefix, deadPID, deadStart))
	if err := os.WriteFile(file, nil, 0o600); err != nil {
		t.Fatal(err)
	}

	// Control: another owner's directory is never swept.
	sweepRunDirs(tmp, prefix, os.Geteuid()+1)
	if _, err := os.Stat(dead); err != nil {
		t.Fatalf("swept a directory of another owner: %v", err)
	}

	sweepRunDirs(tmp, prefix, os.Geteuid())
	if _, err := os.Lstat(dead); err == nil {
		t.Errorf("%s: the directory of an ended run was kept", dead)
	}
	for _, p := range []string{live, other, link, file} {
		if _, err := os.Lstat(p); err != nil {
			t.Errorf("%s was removed: %v", p, err)
		}
	}

	// The bound: 70 ended runs' directories beside the 3 kept names with
	// the prefix, which count against it too; one call leaves 6 to 9, the
	// next none.
	for i := range 70 {
		mk(fmt.Sprintf("%s%d.%d-%d", prefix, deadPID, deadStart, i))
	}
	left := func() int {
		n := 0
		ents, _ := os.ReadDir(tmp)
		for _, e := range ents {
			if e.IsDir() && strings.HasPrefix(e.Name(), fmt.Sprintf("%s%d.", prefix, deadPID)) {
				n++
			}
		}
		return n
	}
	StartSweep(tmp, prefix, os.Geteuid())()
	if n := left(); n < 70-64 || n > 70-64+3 {
		t.Errorf("after one sweep %d ended runs' directories are left, want 6 to 9 (at most 64 names a call)", n)
	}
	StartSweep(tmp, prefix, os.Geteuid())()
	if n := left(); n != 0 {
		t.Errorf("after a second sweep %d ended runs' directories are left, want 0", n)
	}
}

// TestSweepRunDirsNotADirectory: a TMPDIR that is a FIFO is not swept and
// does not block the sweep (an open without O_DIRECTORY waits for a
// writer); the control, a plain open of the same FIFO, does block.
func TestSweepRunDirsNotADirectory(t *testing.T) {
	fifo := filepath.Join(t.TempDir(), "fifo")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	blocks := func(d time.Duration, f func()) bool {
		done := make(chan struct{})
		go func() { defer close(done); f() }()
		select {
		case <-done:
			return false
		case <-time.After(d):
			return true
		}
	}
	if !blocks(300*time.Millisecond, func() {
		if f, err := os.Open(fifo); err == nil {
			f.Close()
		}
	}) {
		t.Fatal("control: a plain open of the FIFO did not block (untested)")
	}
	// Release the control's open, still waiting for a writer.
	if w, err := os.OpenFile(fifo, os.O_WRONLY|syscall.O_NONBLOCK, 0); err == nil {
		w.Close()
	}
	if blocks(10*time.Second, func() { sweepRunDirs(fifo, "sandbox-run-test-", os.Geteuid()) }) {
		t.Error("sweepRunDirs blocked on a TMPDIR that is a FIFO")
	}
}
