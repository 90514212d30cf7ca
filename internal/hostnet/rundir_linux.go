package hostnet

// A run's runtime directories live in the host's TMPDIR, named for the
// run's process (PREFIX+PID.START-RANDOM), so that a run killed before
// its own cleanup leaves nothing that the next run does not remove.

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"

	"github.com/sandbox-run/sandbox-run/internal/fault"
	"github.com/sandbox-run/sandbox-run/internal/plan"
	"github.com/sandbox-run/sandbox-run/internal/procid"
	"github.com/sandbox-run/sandbox-run/policy"
)

// sweepRunDirs removes the directories in tmp named prefix+PID.START-...
// whose process (that pid with that start time) no longer runs: what a
// sandbox-run killed before its own cleanup left. Only directories owned
// by owner, never through a link, at most 64 per call. It reads names
// only, unsorted: a TMPDIR of thousands of entries is common, and listing
// it is most of the cost.
func sweepRunDirs(tmp, prefix string, owner int) {
	// O_DIRECTORY: a TMPDIR that is a FIFO fails here instead of
	// blocking the open, and the run's cleanup with it.
	d, err := os.OpenFile(tmp, os.O_RDONLY|syscall.O_DIRECTORY, 0)
	if err != nil {
		return
	}
	defer d.Close()
	for n := 0; n < 64; {
		names, err := d.Readdirnames(256)
		for _, name := range names {
			if strings.HasPrefix(name, prefix) && n < 64 {
				n++
				sweepRunDir(tmp, name, prefix, owner)
			}
		}
		if err != nil {
			return // io.EOF, or unreadable
		}
	}
}

// sweepRunDir removes tmp/name (see sweepRunDirs) when its run is gone.
func sweepRunDir(tmp, name, prefix string, owner int) {
	pidStart, _, _ := strings.Cut(strings.TrimPrefix(name, prefix), "-")
	ps, ss, _ := strings.Cut(pidStart, ".")
	pid, err1 := strconv.Atoi(ps)
	start, err2 := strconv.ParseUint(ss, 10, 64)
	if err1 != nil || err2 != nil || procid.Alive(pid, start) {
		return
	}
	p := filepath.Join(tmp, name)
	// Gone meanwhile (a parallel run swept it), not a directory, a link,
	// or another's.
	fi, err := os.Lstat(p)
	if err != nil || !fi.IsDir() {
		return
	}
	if st, ok := fi.Sys().(*syscall.Stat_t); !ok || int(st.Uid) != owner {
		return
	}
	os.RemoveAll(p)
}

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
