package plan

import (
	"path/filepath"

	"github.com/sandbox-run/sandbox-run/pathguard"
)

// Resolved is p with its links resolved, or p when that fails (a
// missing path, a loop): for what is compared, never for what is opened.
func Resolved(p string) string {
	if r, err := filepath.EvalSymlinks(p); err == nil {
		return r
	}
	return p
}

// ResolvedAll is Resolved of each of ps.
func ResolvedAll(ps []string) []string {
	out := make([]string, len(ps))
	for i, p := range ps {
		out[i] = Resolved(p)
	}
	return out
}

// ResolvedPath is filepath.EvalSymlinks of p through rv's memo (nil: none):
// the path p resolves to, and whether it exists. A p that is not absolute
// and clean is resolved by EvalSymlinks itself.
func ResolvedPath(rv *pathguard.Resolver, p string) (string, bool) {
	if !filepath.IsAbs(p) || filepath.Clean(p) != p {
		r, err := filepath.EvalSymlinks(p)
		return r, err == nil
	}
	r, err := rv.Resolve(p)
	return r.Path, err == nil && r.Exists
}
