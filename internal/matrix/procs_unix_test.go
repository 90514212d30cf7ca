//go:build linux || darwin

package matrix

import (
	"encoding/binary"
	"fmt"
	"os"
	"os/exec"
	"reflect"
	"slices"
	"testing"
	"time"
)

// fakeListing is a process table made up for the test, in the shape both
// listProcesses return; no real process is behind it.
var fakeListing = []proc{
	{pid: 1, args: []string{"/sbin/launchd"}},
	{pid: 100, args: []string{"sleep", "3600", "survivor-4242-abc"}},
	{pid: 101, args: []string{"sh", "-c", "echo survivor-4242-abc"}}, // the tag inside a longer argument
	{pid: 102, args: nil}, // arguments not readable (another uid)
	{pid: 4242, args: []string{"check.test", "survivor-4242-abc"}}, // the test itself
	{pid: 103, args: []string{"sleep", "survivor-4242-abcdef"}},
}

func TestTaggedInFakeListing(t *testing.T) {
	exact := func(a string) bool { return a == "survivor-4242-abc" }
	if got := taggedIn(fakeListing, 4242, exact); !reflect.DeepEqual(got, []int{100}) {
		t.Errorf("exact: %v, want [100]", got)
	}
	prefix := func(a string) bool { return len(a) >= 14 && a[:14] == "survivor-4242-" }
	if got := taggedIn(fakeListing, 4242, prefix); !reflect.DeepEqual(got, []int{100, 103}) {
		t.Errorf("prefix: %v, want [100 103]", got)
	}
	if got := taggedIn(nil, 4242, exact); len(got) != 0 {
		t.Errorf("empty listing: %v", got)
	}
}

// procArgs2 builds a kern.procargs2 buffer as macOS lays it out.
func procArgs2(exe string, argv, env []string) []byte {
	b := binary.LittleEndian.AppendUint32(nil, uint32(len(argv)))
	b = append(b, exe...)
	b = append(b, 0, 0, 0, 0) // the path's NUL and alignment padding
	for _, s := range append(slices.Clone(argv), env...) {
		b = append(append(b, s...), 0)
	}
	return b
}

func TestParseProcArgs2Constructed(t *testing.T) {
	b := procArgs2("/bin/sleep", []string{"sleep", "survivor-1-x"}, []string{"PATH=/usr/bin"})
	got, err := parseProcArgs2(b)
	if err != nil || !reflect.DeepEqual(got, []string{"sleep", "survivor-1-x", "PATH=/usr/bin"}) {
		t.Fatalf("got %q, %v", got, err)
	}
	for _, bad := range [][]byte{nil, {1, 0}, append(binary.LittleEndian.AppendUint32(nil, 1), "/no/end"...),
		procArgs2("/bin/x", nil, nil)[:4:4], append(procArgs2("/bin/x", []string{"a"}, nil)[:4], "/bin/x\x00"...)} {
		if got, err := parseProcArgs2(bad); err == nil {
			t.Errorf("parseProcArgs2(%q) = %q, want an error", bad, got)
		}
	}
}

// TestTaggedFindsARealProcess is tagged's positive control on this host:
// a process started with a unique tag is listed, and is not once it is
// gone. Without it, a listing that always came back empty would pass.
func TestTaggedFindsARealProcess(t *testing.T) {
	tag := fmt.Sprintf("survivor-%d-listing-control", os.Getpid())
	c := exec.Command("/bin/sh", "-c", "sleep 30", "sh", tag)
	if err := c.Start(); err != nil {
		t.Fatal(err)
	}
	defer c.Process.Kill()
	found := false
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		pids, err := tagged(tag)
		if err != nil {
			t.Fatal(err)
		}
		if slices.Contains(pids, c.Process.Pid) {
			found = true
			break
		}
	}
	if !found {
		t.Fatalf("a running process tagged %s was not listed", tag)
	}
	c.Process.Kill()
	c.Wait()
	if pids, err := tagged(tag); err != nil || slices.Contains(pids, c.Process.Pid) {
		t.Errorf("after the kill: %v, %v", pids, err)
	}
}
