package procid

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"strconv"
	"strings"
	"syscall"
)

// State is what a Judge can tell of a named process.
type State int

const (
	// Unknown: the judge cannot tell (the name was made in another
	// namespace, the judge's /proc is not its own namespace's, or /proc
	// could not be read). A caller must not act as if the process ended.
	Unknown State = iota
	// Alive: the process runs (as read at the moment asked).
	Alive
	// Ended: the process certainly no longer runs.
	Ended
)

// Judge judges names from one process's vantage point, read once (by
// NewJudge) for any number of names. The zero Judge answers Unknown.
type Judge struct {
	token string // the judge's Token; "" when it can judge no name
}

// NewJudge reads this process's vantage point. It can judge only when
// /proc shows this process's own pid namespace: a /proc mounted for an
// ancestor namespace (a namespace unshared without --mount-proc) lists
// the ancestor's pids, so a pid of this namespace read there would be
// another process's.
func NewJudge() Judge {
	t, err := Token()
	if err != nil || !procIsOwn() {
		return Judge{}
	}
	return Judge{token: t}
}

// State judges id: Unknown unless the judge can judge and id was made in
// the judge's namespaces (or is legacy, see the package's doc); then
// Alive when its pid runs with its start time, Ended when the pid is not
// listed or started at another time (reused).
func (j Judge) State(id ID) State {
	if j.token == "" || (id.NS != "" && id.NS != j.token) {
		return Unknown
	}
	s, err := Start(id.PID)
	switch {
	case err == nil && s == id.Start:
		return Alive
	case err == nil || errors.Is(err, fs.ErrNotExist) || errors.Is(err, syscall.ESRCH):
		return Ended
	}
	return Unknown
}

// initialTimeNS is the inode of the initial time namespace
// (PROC_TIME_INIT_INO), fixed by the kernel: a token leaves it out, so
// that the usual token is the pid namespace's alone.
const initialTimeNS = 0xEFFFFFFA

// Token names the namespaces this process's pids and start times are
// read in: its pid namespace's inode in hex, then 't' and its time
// namespace's inode when that is not the initial one (start times are
// shifted by a time namespace's boot-time offset). The inodes are read by
// stat of /proc/self/ns/*, which follows the link to the namespace
// itself: the answer is this process's namespace even when /proc was
// mounted for an ancestor one. A namespace's inode is unique while the
// namespace lives; one reused later names a namespace made after every
// process of the old one ended.
func Token() (string, error) {
	pidns, err := nsInode("/proc/self/ns/pid")
	if err != nil {
		return "", err
	}
	t := strconv.FormatUint(pidns, 16)
	timens, err := nsInode("/proc/self/ns/time")
	switch {
	case errors.Is(err, fs.ErrNotExist):
		// Before Linux 5.6: no time namespaces.
	case err != nil:
		return "", err
	case timens != initialTimeNS:
		t += "t" + strconv.FormatUint(timens, 16)
	}
	return t, nil
}

// nsInode is the inode of the namespace the link p names.
func nsInode(p string) (uint64, error) {
	var st syscall.Stat_t
	if err := syscall.Stat(p, &st); err != nil {
		return 0, &fs.PathError{Op: "stat", Path: p, Err: err}
	}
	return st.Ino, nil
}

// procIsOwn says whether /proc shows this process's own pid namespace:
// its NSpid line (Linux 4.1) lists its pid in every namespace from
// /proc's down to its own, so one entry, equal to getpid, means they are
// the same. Without the line, /proc/self must name getpid.
func procIsOwn() bool {
	me := strconv.Itoa(os.Getpid())
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return false
	}
	for _, line := range strings.Split(string(b), "\n") {
		if rest, ok := strings.CutPrefix(line, "NSpid:"); ok {
			f := strings.Fields(rest)
			return len(f) == 1 && f[0] == me
		}
	}
	l, err := os.Readlink("/proc/self")
	return err == nil && l == me
}

// Self names this process (its pid in its own namespace, its start time,
// its Token) and returns the boot's id (/proc/sys/kernel/random/boot_id):
// together they name it across pid reuse, namespaces and reboots. The
// start time is read from /proc/self, which is this process in any /proc.
func Self() (ID, string, error) {
	start, err := startAt("/proc/self/stat")
	if err != nil {
		return ID{}, "", err
	}
	tok, err := Token()
	if err != nil {
		return ID{}, "", err
	}
	b, err := os.ReadFile("/proc/sys/kernel/random/boot_id")
	if err != nil {
		return ID{}, "", err
	}
	return ID{PID: os.Getpid(), Start: start, NS: tok}, string(bytes.TrimSpace(b)), nil
}

// Start reads field 22 of /proc/PID/stat, the start time, as /proc
// numbers pids (see NewJudge).
func Start(pid int) (uint64, error) {
	return startAt("/proc/" + strconv.Itoa(pid) + "/stat")
}

// startAt reads the start time from the stat file p. The command name
// (field 2) may hold spaces and parentheses, so fields are counted after
// its last ')'.
func startAt(p string) (uint64, error) {
	b, err := os.ReadFile(p)
	if err != nil {
		return 0, err
	}
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return 0, fmt.Errorf("procid: %s: %w", p, fs.ErrInvalid)
	}
	f := strings.Fields(string(b[i+1:]))
	// After the name: state is field 3, so start time (22) is f[19].
	if len(f) < 20 {
		return 0, fmt.Errorf("procid: %s: %w", p, fs.ErrInvalid)
	}
	return strconv.ParseUint(f[19], 10, 64)
}
