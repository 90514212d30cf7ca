package hostnet

// A run's runtime directories live in the host's TMPDIR, named for the
// run's process (PREFIX+ID-RANDOM, ID a procid.ID: PID.START.NS), so that
// a run killed before its own cleanup leaves nothing that the next run
// able to judge it does not remove. TMPDIR may be shared with runs in
// other pid namespaces (a sandbox-run inside a container or a sandbox):
// their directories are left to a run in their namespace (procid.Judge).

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"

	"github.com/sandbox-run/sandbox-run/internal/fault"
	"github.com/sandbox-run/sandbox-run/internal/plan"
	"github.com/sandbox-run/sandbox-run/internal/procid"
	"github.com/sandbox-run/sandbox-run/policy"
)

// sweepRunDirs removes the directories in tmp named prefix+ID-... whose
// process certainly no longer runs (procid.Ended): what a sandbox-run
// killed before its own cleanup left. A directory of another pid
// namespace's run is kept, whether or not that run lives: this process
// cannot tell (procid.Unknown), and removing a live run's directory
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
	for n := 0; n < 64; {
		names, err := d.Readdirnames(256)
		for _, name := range names {
			if strings.HasPrefix(name, prefix) && n < 64 {
				n++
				sweepRunDir(judge, tmp, name, prefix, owner)
			}
		}
		if err != nil {
			return // io.EOF, or unreadable
		}
	}
}

// sweepRunDir removes tmp/name (see sweepRunDirs) when judge can tell
// its run ended; a name that is no procid.ID stays.
func sweepRunDir(judge procid.Judge, tmp, name, prefix string, owner int) {
	ids, _, _ := strings.Cut(strings.TrimPrefix(name, prefix), "-")
	id, err := procid.Parse(ids)
	if err != nil || judge.State(id) != procid.Ended {
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

// RunDirPattern is the os.MkdirTemp pattern of a run directory named
// prefix for the process id: prefix+ID-, RANDOM appended by MkdirTemp.
// The token costs 9 bytes over a legacy name: with /tmp as TMPDIR the
// network directory's longest socket path,
// /tmp/sandbox-run-net-PID.START.NS-RANDOM/publish-NNN.sock, is at most
// 78 bytes (pid 7 digits, start 12, NS 8 hex, RANDOM 10), 87 in a time
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
