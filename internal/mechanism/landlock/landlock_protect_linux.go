package landlock

import (
	"path/filepath"
	"strconv"
	"strings"

	"github.com/sandbox-run/sandbox-run/internal/protect"
	"github.com/sandbox-run/sandbox-run/report"
)

// Protected paths under --sandbox landlock. Landlock grants are additive
// beneath a path: under a writable directory no rule can take write
// access to a protected path away, and there is no mount to hold it. So
// every existing protected path is writable while the run lasts (the live
// window, a named loss; a missing one is the live guard's, as under
// bwrap), and the run takes part in the same journal as bwrap
// runs (protect.Start): a missing protected path is watched and what the
// command created there is quarantined; an existing one is snapshotted at
// the start, and if it differs when the journal settles (the last run on
// the directory has ended) it is quarantined and the snapshot put back;
// a git directory that did not exist at the start is stripped. The
// skeleton builds the plan with its copies (plan.Layout.Copies) and
// settles the journal once the run is over.

// protectedReport states how the protected paths were handled.
func (r *llRun) protectedReport() report.Protection {
	held, watched := len(r.prot.Held), len(r.prot.Watched)
	return report.Protection{Name: "protected_paths", Configured: true,
		Detail: strconv.Itoa(held) + " existing ones kept as copies, " + strconv.Itoa(watched) +
			" missing ones watched: the existing ones writable while the run lasts (Landlock cannot hold them), what appears at a missing one moved out as it appears (the live guard); when the last run on the directory ends, changes are quarantined and the copies put back"}
}

func heldPaths(hs []protect.HeldCopy) []string {
	out := make([]string, 0, len(hs))
	for _, h := range hs {
		out = append(out, h.Path)
	}
	return out
}

// ownName says whether pp is a protected name in one of sandbox-run's own
// state dirs, which is not held there (protect.SplitOwn); the held parts of
// a git directory there are.
func ownName(pp string, own []string) bool {
	for _, o := range own {
		if rel, err := filepath.Rel(o, pp); err == nil && rel != ".." && !strings.HasPrefix(rel, "../") {
			return rel != ".git" && !strings.HasPrefix(rel, ".git/")
		}
	}
	return false
}
