package sandbox

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

// TestSweepRunDirs: a run directory whose process is gone is removed; one
// whose process runs, one of another owner, a link and a name of another
// prefix are kept.
func TestSweepRunDirs(t *testing.T) {
	tmp := t.TempDir()
	// A process that has ended: its pid and start time name no process.
	c := exec.Command("true")
	if err := c.Start(); err != nil {
		t.Fatal(err)
	}
	deadPID := c.Process.Pid
	deadStart, err := procStart(deadPID)
	if err != nil {
		deadStart = 1 // ended already: any start time names no process
	}
	c.Wait()
	selfStartTime, _, err := selfStart()
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
	live := mk(fmt.Sprintf("%s%d.%d-y", prefix, os.Getpid(), selfStartTime))
	other := mk(fmt.Sprintf("other-%d.%d-z", deadPID, deadStart))
	link := filepath.Join(tmp, fmt.Sprintf("%s%d.%d-l", prefix, deadPID, deadStart))
	if err := os.Symlink(live, link); err != nil {
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
	for _, p := range []string{live, other, link} {
		if _, err := os.Lstat(p); err != nil {
			t.Errorf("%s was removed: %v", p, err)
		}
	}
}
