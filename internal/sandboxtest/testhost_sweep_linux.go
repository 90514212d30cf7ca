package sandboxtest

import (
	"fmt"
	"os"
	"syscall"
)

// sweepTestHosts removes the test hosts of test processes that are gone
// (killed before their cleanup ran): a namespace srp-test-PID-IDX whose
// PID no longer exists, and its veth. A live process's hosts are its own.
func sweepTestHosts(run func(args ...string) error) {
	ents, err := os.ReadDir("/run/netns")
	if err != nil {
		return
	}
	for _, e := range ents {
		var pid, idx int
		if n, _ := fmt.Sscanf(e.Name(), "srp-test-%d-%d", &pid, &idx); n != 2 || pid <= 0 ||
			e.Name() != fmt.Sprintf("srp-test-%d-%d", pid, idx) {
			continue
		}
		if syscall.Kill(pid, 0) != syscall.ESRCH {
			continue
		}
		_ = run("link", "del", fmt.Sprintf("srp%da%d", pid%100000, idx))
		_ = run("netns", "del", e.Name())
	}
}
