package sandbox

import (
	"fmt"
	"path/filepath"
	"slices"

	"github.com/sandbox-run/sandbox-run/bwrap"
)

// coverWritable searches every writable directory for Unix sockets and
// FIFOs and binds /dev/null over each one found, as addRead does for the
// --read paths: a service's socket in a project (git's fsmonitor socket in
// .git/, a dev server's or an agent's socket) would otherwise be the
// command's to connect to, and a FIFO a host process reads would be its to
// write. Writing the directory does not make this worse or better: connect()
// needs only write permission on the inode.
//
// It runs after every other bind of the plan: a later bind of a directory
// inside a writable one (a protected path held onto itself) would lay the
// host's uncovered tree over the covers. A writable directory inside
// another one is searched with it, once. The search has an entries budget
// of its own (lim.entries for all writable directories of the run
// together) and shares the covered bound with the --read search; over a
// bound the run is refused.
//
// Non-guarantee: a socket or FIFO made in a writable directory after the
// search (by a host process while the run goes on: a tmux or fsmonitor
// started later) is reachable from inside.
func (pl *plan) coverWritable(lim scanLimits) error {
	for _, w := range pl.writable {
		if slices.ContainsFunc(pl.writable, func(o string) bool { return o != w && within(w, o) }) {
			continue
		}
		if _, seen := pl.wscan.done[w]; seen || slices.Contains(pl.own, w) {
			continue
		}
		lim.usedEntries, lim.usedCovered = pl.wscan.entries, len(pl.scan.covered)+len(pl.wscan.covered)
		res, err := scanSpecial(w, lim)
		pl.wscan.entries += res.entries
		pl.wscan.elapsed += res.elapsed
		if pl.wscan.done == nil {
			pl.wscan.done = map[string]scanResult{}
		}
		pl.wscan.done[w] = res
		if err != nil {
			return setupErr("writable dir "+w, "cannot be searched for Unix sockets and FIFOs: "+errText(err),
				fmt.Sprintf("pass a narrower --workdir or --write (the search of all writable dirs stops at %d entries, %d levels, %d sockets and FIFOs)",
					lim.entries, lim.depth, lim.covered))
		}
		for _, f := range res.found {
			dst := filepath.Join(w, f.rel)
			if slices.Contains(pl.wscan.covered, dst) {
				continue
			}
			pl.mounts = append(pl.mounts, bwrap.Mount{Kind: bwrap.ROBind, Src: "/dev/null", Dst: dst, FD: -1})
			pl.wscan.covered = append(pl.wscan.covered, dst)
		}
	}
	return nil
}
