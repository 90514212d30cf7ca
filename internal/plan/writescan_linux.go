package plan

import (
	"fmt"
	"path/filepath"
	"slices"

	"github.com/sandbox-run/sandbox-run/internal/fault"
	"github.com/sandbox-run/sandbox-run/internal/hostwalk"
	"github.com/sandbox-run/sandbox-run/pathguard"
	"github.com/sandbox-run/sandbox-run/policy"
)

// scanWritable searches every writable directory (but own, sandbox-run's
// own state dirs) for Unix sockets and FIFOs, for the layout to bind
// /dev/null over each one found, as it does for the --read paths: a
// service's socket in a project (git's fsmonitor socket in .git/, a dev
// server's or an agent's socket) would otherwise be the command's to
// connect to, and a FIFO a host process reads would be its to write.
// Writing the directory does not make this worse or better: connect()
// needs only write permission on the inode.
//
// The layout covers them after every other bind of the plan: a later bind
// of a directory inside a writable one (a protected path held onto itself)
// would lay the host's uncovered tree over the covers. A writable
// directory inside another one is searched with it, once. The search has
// an entries budget of its own (lim.Entries for all writable directories
// of the run together) and shares the covered bound with the --read
// search; over a bound the run is refused.
//
// Non-guarantee: a socket or FIFO made in a writable directory after the
// search (by a host process while the run goes on: a tmux or fsmonitor
// started later) is reachable from inside.
func (f *hostFacts) scanWritable(rv *pathguard.Resolver, writable, own []string, lim hostwalk.ScanLimits, tops hostwalk.Tops) error {
	for _, w := range writable {
		if slices.ContainsFunc(writable, func(o string) bool { return o != w && policy.Within(w, o) }) {
			continue
		}
		if _, seen := f.wscan.done[w]; seen || slices.Contains(own, w) {
			continue
		}
		lim.UsedEntries, lim.UsedCovered = f.wscan.Entries, len(f.scan.Covered)+len(f.wscan.Covered)
		res, err := hostwalk.ScanSpecialFrom(rv, w, lim, tops[w])
		f.wscan.Entries += res.Entries
		f.wscan.Elapsed += res.Elapsed
		if f.wscan.done == nil {
			f.wscan.done = map[string]hostwalk.ScanResult{}
		}
		f.wscan.done[w] = res
		if err != nil {
			return fault.New("writable dir "+w, "cannot be searched for Unix sockets and FIFOs: "+fault.Reason(err),
				fmt.Sprintf("pass a narrower --workdir or --write (the search of all writable dirs stops at %d entries, %d levels, %d sockets and FIFOs)",
					lim.Entries, lim.Depth, lim.Covered))
		}
		for _, sf := range res.Found {
			if dst := filepath.Join(w, sf.Rel); !slices.Contains(f.wscan.Covered, dst) {
				f.wscan.Covered = append(f.wscan.Covered, dst)
			}
		}
	}
	return nil
}
