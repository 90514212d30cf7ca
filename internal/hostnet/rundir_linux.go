package hostnet

// A run's runtime directories live in the host's TMPDIR, named for the
// run's process (PREFIX+ID-hRANDOM, ID a procid.ID: PID.START.NS), so that
// a run killed before its own cleanup leaves nothing that the next run
// able to judge it does not remove. TMPDIR may be shared with runs in
// other pid namespaces (a sandbox-run inside a container or a sandbox):
// their pids mean nothing here (procid.Judge answers Unknown), so each
// run also holds a lock on its directory for its life (MakeRunDir), which
// the kernel drops when the run's process ends, in whatever namespace,
// and which a run anywhere can probe (procid.ProbeAt). The h marks the
// held directories: one without it (an older version's, or one whose lock
// could not be taken) is judged by its pid alone, as before.

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"

	"github.com/sandbox-run/sandbox-run/internal/fault"
	"github.com/sandbox-run/sandbox-run/internal/plan"
	"github.com/sandbox-run/sandbox-run/internal/procid"
	"github.com/sandbox-run/sandbox-run/policy"
)

// heldMark begins the -SUFFIX of a directory its run holds (MakeRunDir).
// MkdirTemp's RANDOM is decimal digits, so no unheld name carries it;
// older versions cut the name at its '-' and judge it by its pid, as
// they judge every name.
const heldMark = "h"

// MakeRunDir creates a run directory of this process (id, procid.Self)
// in TMPDIR, 0700 as os.MkdirTemp makes it, named prefix+ID-hRANDOM and
// held: release drops the lock, and is called after the directory is
// removed (a sweep may remove it once the lock is free).
//
// The lock is taken before the name is final: the directory is made
// under its unheld name (prefix+ID-RANDOM, which a sweep judges by the
// pid alone, so a run of another namespace keeps it), locked, then
// renamed, never over an existing name. A sweep that probes a held name
// finds its lock taken for as long as the run lives; a directory made
// but not yet locked is never probed. When the lock or the rename fails
// (a file system without flock or RENAME_NOREPLACE, a name planted in
// its way), the directory keeps its unheld name: judged as before.
func MakeRunDir(prefix string, id procid.ID) (dir string, release func(), err error) {
	dir, err = os.MkdirTemp("", RunDirPattern(prefix, id))
	if err != nil {
		return "", nil, err
	}
	parent, name := filepath.Split(dir)
	pfd, err := unix.Open(parent, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return dir, func() {}, nil
	}
	defer unix.Close(pfd)
	release, ok := procid.HoldAt(pfd, name)
	if !ok {
		return dir, release, nil
	}
	held := RunDirPattern(prefix, id) + heldMark + strings.TrimPrefix(name, RunDirPattern(prefix, id))
	if unix.Renameat2(pfd, name, pfd, held, unix.RENAME_NOREPLACE) != nil {
		return dir, release, nil
	}
	return filepath.Join(parent, held), release, nil
}

// sweepRunDirs removes the directories in tmp named prefix+ID-... whose
// process certainly no longer runs (runState): what a sandbox-run
// killed before its own cleanup left. A directory whose run this process
// cannot judge (procid.Unknown: an unheld name of another pid namespace)
// is kept, whether or not that run lives: removing a live run's directory
// breaks it. Legacy names (PREFIX+PID.START-...) are judged as before.
// Only directories owned by owner, never through a link, at most 64 per
// call. It reads names only, unsorted: a TMPDIR of thousands of entries
// is common, and listing it is most of the cost.
func sweepRunDirs(tmp, prefix string, owner int) {
	// O_DIRECTORY: a TMPDIR that is a FIFO fails here instead of
	// blocking the open, and the run's cleanup with it.
	d, err := os.OpenFile(tmp, os.O_RDONLY|syscall.O_DIRECTORY, 0)
	if err != nil {
		return
	}
	defer d.Close()
	judge := procid.NewJudge()
	dfd := int(d.Fd())
	for n := 0; n < 64; {
		names, err := d.Readdirnames(256)
		for _, name := range names {
			if strings.HasPrefix(name, prefix) && n < 64 {
				n++
				sweepRunDir(judge, dfd, tmp, name, prefix, owner)
			}
		}
		if err != nil {
			return // io.EOF, or unreadable
		}
	}
}

// sweepRunDir removes tmp/name, open as dfd (see sweepRunDirs), when its
// run ended; a name that is no procid.ID stays.
func sweepRunDir(judge procid.Judge, dfd int, tmp, name, prefix string, owner int) {
	ids, suffix, _ := strings.Cut(strings.TrimPrefix(name, prefix), "-")
	id, err := procid.Parse(ids)
	if err != nil {
		return
	}
	// Gone meanwhile (a parallel run swept it), not a directory, a link,
	// or another's: not judged, so never opened to probe its lock.
	var st unix.Stat_t
	if unix.Fstatat(dfd, name, &st, unix.AT_SYMLINK_NOFOLLOW) != nil ||
		st.Mode&unix.S_IFMT != unix.S_IFDIR || int(st.Uid) != owner {
		return
	}
	if runState(judge, dfd, name, id, suffix) == procid.Ended {
		// RemoveAll unlinks relative to descriptors it opens with
		// O_NOFOLLOW: a link planted inside, or in the name's place, is
		// removed, never followed.
		os.RemoveAll(filepath.Join(tmp, name))
	}
}

// runState judges the run of the directory name in dfd (ID id, -SUFFIX
// suffix): by its pid where judge can (the run's pid namespace is this
// process's, with its own /proc: sound either way), else by its lock if
// the name says it is held. Unknown keeps the directory.
func runState(judge procid.Judge, dfd int, name string, id procid.ID, suffix string) procid.State {
	if st := judge.State(id); st != procid.Unknown || !strings.HasPrefix(suffix, heldMark) {
		return st
	}
	return procid.ProbeAt(dfd, name)
}

// RunDirPattern is the os.MkdirTemp pattern of a run directory named
// prefix for the process id: prefix+ID-, RANDOM appended by MkdirTemp
// (MakeRunDir puts heldMark before it). The token costs 9 bytes over a
// legacy name, the mark 1: with /tmp as TMPDIR the network directory's
// longest socket path,
// /tmp/sandbox-run-net-PID.START.NS-hRANDOM/publish-NNN.sock, is at most
// 79 bytes (pid 7 digits, start 12, NS 8 hex, RANDOM 10), 88 in a time
// namespace (NS 17), under sun_path's 108.
func RunDirPattern(prefix string, id procid.ID) string { return prefix + id.String() + "-" }

// StartSweep runs sweepRunDirs beside the run's set-up, off the path to
// the command's start, and returns the wait for it, which the run's
// cleanup calls: a run never sweeps its own directory (its process is
// alive), and it leaves nothing running behind it.
func StartSweep(tmp, prefix string, owner int) (wait func()) {
	done := make(chan struct{})
	go func() {
		defer close(done)
		sweepRunDirs(tmp, prefix, owner)
	}()
	return func() { <-done }
}

// CheckTmpdir refuses a TMPDIR inside a writable directory of the run:
// held, what sandbox-run keeps in its runtime directory there, would be
// in the command's reach, and so would the directories sweepRunDirs
// removes.
func CheckTmpdir(writable []string, held string) error {
	tmp := os.TempDir()
	for _, t := range []string{tmp, plan.Resolved(tmp)} {
		if policy.InsideAny(t, writable) || policy.InsideAny(t, plan.ResolvedAll(writable)) {
			return fault.New("TMPDIR "+tmp+" lies in a writable directory", held+" would be in the command's reach",
				"point TMPDIR at a directory outside every --workdir and --write dir, such as /tmp")
		}
	}
	return nil
}
