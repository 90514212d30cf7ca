package bwrap

import (
	"fmt"
	"os"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"

	bw "github.com/sandbox-run/sandbox-run/bwrap"
	"github.com/sandbox-run/sandbox-run/internal/mechanism"
	"github.com/sandbox-run/sandbox-run/pathguard"
)

// Descriptor numbers as bwrap and init see them: ExtraFiles[i] is fd 3+i.
const (
	fdArgs    = 3 // --args stream, consumed by bwrap
	fdStatus  = 4 // init's status line, closed by init before the command runs
	fdStderr  = 5 // the real stderr, which init makes the command's fd 2
	fdInfo    = 6 // bwrap --info-fd, written by bwrap outside the sandbox
	fdInit    = 7 // the init binary (O_PATH, openInit), executed by bwrap
	fdSeccomp = 8 // the seccomp program, consumed by bwrap
	fdBinds   = 9 // first descriptor of the bind plan
)

var (
	toolBwrap = mechanism.Tool{Name: "bwrap", Flag: "--bwrap", Install: "install bubblewrap (apt-get install -y bubblewrap, dnf install bubblewrap) or pass --bwrap PATH" + bw.LandlockFix}
)

// findBwrap resolves the bwrap to use, refusing one inside a writable dir.
func findBwrap(rv *pathguard.Resolver, want string, writable []string) (string, error) {
	return mechanism.FindTool(rv, toolBwrap, want, writable)
}

// fullDirs returns the writable directories whose file system is full
// once the command has ended (no block or no inode left for an
// unprivileged writer), so that a command that failed with ENOSPC is
// explained. A file system is named once, by its first directory.
func fullDirs(writable []string) []string {
	var full []string
	seen := map[uint64]bool{}
	for _, dir := range writable {
		var st unix.Stat_t
		var fs unix.Statfs_t
		if unix.Stat(dir, &st) != nil || unix.Statfs(dir, &fs) != nil || seen[st.Dev] {
			continue
		}
		seen[st.Dev] = true
		if fs.Bavail == 0 || (fs.Files > 0 && fs.Ffree == 0) {
			full = append(full, dir)
		}
	}
	return full
}

// selfPath is the binary bwrap starts as init: this one (see Reexec).
func selfPath(mechanism.Config) string { return "/proc/self/exe" }

// hostUIDOf reads the real uid of pid as the host sees it: the uid the
// sandbox's processes hold outside their user namespace.
func hostUIDOf(pid int) int {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return -1
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "Uid:"); ok {
			if f := strings.Fields(v); len(f) > 0 {
				n, err := strconv.Atoi(f[0])
				if err == nil {
					return n
				}
			}
		}
	}
	return -1
}
