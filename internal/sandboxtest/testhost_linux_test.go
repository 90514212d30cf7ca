package sandboxtest

import (
	"fmt"
	"os"
	"os/exec"
	"testing"
)

// TestNewTestHostSweepsDeadHosts: a test host left by a process that was
// killed before its cleanup (a namespace named for a pid that is gone) is
// removed by the next NewTestHost; one named for a live pid is not.
func TestNewTestHostSweepsDeadHosts(t *testing.T) {
	Root(t)
	if _, err := exec.LookPath("ip"); err != nil {
		Unavailable(t, "network namespaces", "install iproute2")
	}
	dead := exec.Command("true")
	if err := dead.Run(); err != nil {
		t.Fatal(err)
	}
	live := exec.Command("sleep", "30")
	if err := live.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { live.Process.Kill(); live.Wait() }()
	names := []string{fmt.Sprintf("srp-test-%d-3", dead.Process.Pid), fmt.Sprintf("srp-test-%d-3", live.Process.Pid)}
	for _, ns := range names {
		if out, err := exec.Command("ip", "netns", "add", ns).CombinedOutput(); err != nil {
			t.Fatalf("ip netns add %s: %v: %s", ns, err, out)
		}
		defer exec.Command("ip", "netns", "del", ns).Run()
	}
	exists := func(ns string) bool { _, err := os.Stat("/run/netns/" + ns); return err == nil }
	if !exists(names[0]) || !exists(names[1]) { // the control: both are there
		t.Fatalf("namespaces %v not made", names)
	}
	NewTestHost(t, 0)
	if exists(names[0]) {
		t.Errorf("%s, of a process that is gone, was not swept", names[0])
	}
	if !exists(names[1]) {
		t.Errorf("%s, of a live process, was swept", names[1])
	}
}
