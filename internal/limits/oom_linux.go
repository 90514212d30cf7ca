package limits

import (
	"fmt"
	"os"
	"strconv"
	"strings"
)

// RaiseOOMScore sets the calling process's oom_score_adj to OOMScoreAdj;
// every process it starts afterwards inherits it. Raising the value needs
// no privilege, so an error means /proc is missing or read-only.
func RaiseOOMScore() error { return SetOOMScore(0) }

// SetOOMScore sets the oom_score_adj of pid (0: the caller) to
// OOMScoreAdj. A process of the same user, or any as root, may be raised.
func SetOOMScore(pid int) error {
	f, err := os.OpenFile(oomPath(pid), os.O_WRONLY, 0)
	if err != nil {
		return fmt.Errorf("limits: oom_score_adj: %w", err)
	}
	_, err = f.WriteString(strconv.Itoa(OOMScoreAdj))
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("limits: oom_score_adj: %w", err)
	}
	return nil
}

// OOMScore reads the oom_score_adj of pid (0: the caller), as the kernel
// holds it.
func OOMScore(pid int) (int, error) {
	b, err := os.ReadFile(oomPath(pid))
	if err != nil {
		return 0, fmt.Errorf("limits: oom_score_adj: %w", err)
	}
	n, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil {
		return 0, fmt.Errorf("limits: oom_score_adj of %d: %w", pid, err)
	}
	return n, nil
}

func oomPath(pid int) string {
	if pid == 0 {
		return "/proc/self/oom_score_adj"
	}
	return "/proc/" + strconv.Itoa(pid) + "/oom_score_adj"
}
