package plan

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/sandbox-run/sandbox-run/internal/fault"
	"github.com/sandbox-run/sandbox-run/policy"
)

// Paths are a plan's paths as the host names them: what every
// mechanism's translation starts from, and all that one which matches
// paths instead of binding them (Seatbelt) needs. A Linux plan fills them
// from its layout; ByPath from the policy alone. The zero value names
// nothing.
type Paths struct {
	// Writable are the writable dirs, the workdir first; ReadOnly the
	// --read paths.
	Writable, ReadOnly []string
	// Protected are the protected paths that existed when the plan was
	// made, held read-only; Watched are those that did not. A mechanism
	// that matches paths denies writes to both.
	Protected, Watched []string
}

// ByPath is the plan of a mechanism that matches paths rather than
// binding them (Seatbelt): p with its paths as the kernel names them
// (each link resolved, /var/... as /private/var/... on macOS), and the
// resolved Paths. The workdir and --write dirs must exist as directories;
// a --read or --protect path that cannot be resolved is kept as written.
// The protected paths are the policy's own (policy.ProtectedPaths),
// split by whether they exist. It opens nothing and holds nothing; every
// refusal is a *fault.Error.
func ByPath(p policy.Policy) (policy.Policy, Paths, error) {
	q, err := resolvePolicy(p)
	if err != nil {
		return p, Paths{}, err
	}
	ps := Paths{Writable: q.Writable(), ReadOnly: q.Read}
	for _, pr := range q.ProtectedPaths() {
		if _, err := os.Lstat(pr); err == nil {
			ps.Protected = append(ps.Protected, pr)
		} else {
			ps.Watched = append(ps.Watched, pr)
		}
	}
	return q, ps, nil
}

// resolvePolicy is p with the links of its paths resolved.
func resolvePolicy(p policy.Policy) (policy.Policy, error) {
	q := p
	var err error
	if q.Workdir, err = resolveDir("--workdir", p.Workdir); err != nil {
		return p, err
	}
	q.Write = make([]string, len(p.Write))
	for i, w := range p.Write {
		if q.Write[i], err = resolveDir("--write", w); err != nil {
			return p, err
		}
	}
	q.Read = resolveAbs(p.Read)
	q.Protect = resolveAbs(p.Protect)
	return q, nil
}

// resolveDir is the directory d with its links resolved.
func resolveDir(flag, d string) (string, error) {
	r, err := filepath.EvalSymlinks(d)
	if err != nil {
		return "", fault.New(flag+" "+d, "cannot be resolved ("+pathErrText(err)+")", "create the directory first")
	}
	if fi, err := os.Stat(r); err != nil || !fi.IsDir() {
		return "", fault.New(flag+" "+d, "is not a directory", "name a directory")
	}
	return r, nil
}

// resolveAbs is each absolute path of in resolved where it can be, the
// others (a protected name, a missing path) as they are.
func resolveAbs(in []string) []string {
	if in == nil {
		return nil
	}
	out := make([]string, len(in))
	for i, s := range in {
		out[i] = s
		if filepath.IsAbs(s) {
			out[i] = Resolved(s)
		}
	}
	return out
}

// pathErrText is err's reason without the path, which the refusal names.
func pathErrText(err error) string {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return pe.Err.Error()
	}
	return err.Error()
}
