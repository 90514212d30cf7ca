package procid

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"strconv"
	"strings"
)

// Alive says whether pid runs and started at start (Start's clock
// ticks): a pid reused by another process does not count. A process that
// cannot be read (gone, or /proc not mounted) is not alive.
func Alive(pid int, start uint64) bool {
	s, err := Start(pid)
	return err == nil && s == start
}

// Self returns this process's start time (as Start) and the boot's id
// (/proc/sys/kernel/random/boot_id): with the pid, they name this process
// across pid reuse and reboots.
func Self() (uint64, string, error) {
	start, err := Start(os.Getpid())
	if err != nil {
		return 0, "", err
	}
	b, err := os.ReadFile("/proc/sys/kernel/random/boot_id")
	if err != nil {
		return 0, "", err
	}
	return start, string(bytes.TrimSpace(b)), nil
}

// Start reads field 22 of /proc/PID/stat, the start time. The command
// name (field 2) may hold spaces and parentheses, so fields are counted
// after its last ')'.
func Start(pid int) (uint64, error) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0, err
	}
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return 0, errors.New("sandbox: malformed /proc stat")
	}
	f := strings.Fields(string(b[i+1:]))
	// After the name: state is field 3, so start time (22) is f[19].
	if len(f) < 20 {
		return 0, fmt.Errorf("sandbox: /proc/%d/stat: %w", pid, fs.ErrInvalid)
	}
	return strconv.ParseUint(f[19], 10, 64)
}
