package sandbox

// A run's runtime directories live in the host's TMPDIR, named for the
// run's process (PREFIX+PID.START-RANDOM), so that a run killed before
// its own cleanup leaves nothing that the next run does not remove.

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
)

// sweepRunDirs removes the directories in tmp named prefix+PID.START-...
// whose process (that pid with that start time) no longer runs: what a
// sandbox-run killed before its own cleanup left. Only directories owned
// by owner, never through a link, at most 64 per call.
func sweepRunDirs(tmp, prefix string, owner int) {
	ents, err := os.ReadDir(tmp)
	if err != nil {
		return
	}
	n := 0
	for _, e := range ents {
		name, ok := strings.CutPrefix(e.Name(), prefix)
		if !ok || !e.IsDir() || n >= 64 {
			continue
		}
		n++
		pidStart, _, _ := strings.Cut(name, "-")
		ps, ss, _ := strings.Cut(pidStart, ".")
		pid, err1 := strconv.Atoi(ps)
		start, err2 := strconv.ParseUint(ss, 10, 64)
		if err1 != nil || err2 != nil || alive(pid, start) {
			continue
		}
		p := filepath.Join(tmp, e.Name())
		// Gone meanwhile (a parallel run swept it), a link, or another's.
		fi, err := os.Lstat(p)
		if err != nil || !fi.IsDir() {
			continue
		}
		if st, ok := fi.Sys().(*syscall.Stat_t); !ok || int(st.Uid) != owner {
			continue
		}
		os.RemoveAll(p)
	}
}

// checkTmpdir refuses a TMPDIR inside a writable directory of the run:
// held, what sandbox-run keeps in its runtime directory there, would be
// in the command's reach, and so would the directories sweepRunDirs
// removes.
func checkTmpdir(writable []string, held string) error {
	tmp := os.TempDir()
	for _, t := range []string{tmp, resolved(tmp)} {
		if insideAny(t, writable) || insideAny(t, resolvedAll(writable)) {
			return setupErr("TMPDIR "+tmp+" lies in a writable directory", held+" would be in the command's reach",
				"point TMPDIR at a directory outside every --workdir and --write dir, such as /tmp")
		}
	}
	return nil
}
