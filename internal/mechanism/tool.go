package mechanism

import (
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	"github.com/sandbox-run/sandbox-run/internal/fault"
	"github.com/sandbox-run/sandbox-run/internal/plan"
	"github.com/sandbox-run/sandbox-run/pathguard"
	"github.com/sandbox-run/sandbox-run/policy"
)

// Tool names a mechanism's binary for findTool's messages.
type Tool struct{ Name, Flag, Install string }

// FindTool resolves a mechanism's binary: want, or t.name on PATH; one
// that lies in a writable directory (as named or resolved) is refused:
// the command could replace it for the next run. Links are resolved
// through rv's memo (nil: none).
func FindTool(rv *pathguard.Resolver, t Tool, want string, writable []string) (string, error) {
	path := want
	if path == "" {
		var err error
		path, err = lookPath(t.Name, os.Getenv("PATH"), isExecutable)
		if err != nil {
			return "", &fault.Error{What: t.Name + " not found", Why: "no " + t.Name + " on PATH", Fix: t.Install}
		}
	}
	abs, err := filepath.Abs(path)
	if err != nil {
		return "", &fault.Error{What: t.Name + " path " + path, Why: err.Error(), Fix: "pass an absolute " + t.Flag + " PATH"}
	}
	real, err := resolveTool(rv, abs)
	if err != nil {
		return "", &fault.Error{What: t.Name + " not found at " + abs, Why: fault.Reason(err), Fix: strings.Replace(t.Install, ", dnf install bubblewrap", "", 1)}
	}
	for _, w := range writable {
		wr, ok := plan.ResolvedPath(rv, w)
		if !ok {
			wr = w
		}
		for _, cand := range []string{abs, real} {
			if policy.Within(cand, w) || policy.Within(cand, wr) {
				return "", &fault.Error{What: t.Name + " " + abs + " lies in writable directory " + w,
					Why: "the sandboxed command could replace it for the next run",
					Fix: "use a " + t.Name + " outside every --workdir and --write dir, such as /usr/bin/" + t.Name}
			}
		}
	}
	return real, nil
}

// lookPath is exec.LookPath(name) with PATH as path, each directory
// tried once: a directory named again on PATH (a profile that prepends
// what is already there) was already found not to hold name, so trying
// it again changes nothing but the cost. The first match wins and must be
// an executable file, as LookPath checks it; one in a relative directory
// is refused with exec.ErrDot, as LookPath refuses it. check is the test
// of one file (isExecutable).
func lookPath(name, path string, check func(string) error) (string, error) {
	if strings.Contains(name, "/") {
		return exec.LookPath(name)
	}
	tried := map[string]bool{}
	for _, dir := range filepath.SplitList(path) {
		if dir == "" {
			dir = "."
		}
		p := filepath.Join(dir, name)
		if tried[p] {
			continue
		}
		tried[p] = true
		file := p
		if !filepath.IsAbs(p) {
			file = "./" + p // a name with a slash is checked, not searched
		}
		if check(file) != nil {
			continue
		}
		if !filepath.IsAbs(p) {
			return "", &exec.Error{Name: name, Err: exec.ErrDot}
		}
		return p, nil
	}
	return "", &exec.Error{Name: name, Err: exec.ErrNotFound}
}

// isExecutable is exec.LookPath's test of one file: it exists, is not a
// directory, and the effective ids may execute it.
func isExecutable(file string) error {
	_, err := exec.LookPath(file)
	return err
}

// resolveTool is filepath.EvalSymlinks of the absolute, clean abs through
// rv's memo: a missing abs is an error wrapping fs.ErrNotExist.
func resolveTool(rv *pathguard.Resolver, abs string) (string, error) {
	r, err := rv.Resolve(abs)
	if err != nil {
		return "", err
	}
	if !r.Exists {
		return "", &fs.PathError{Op: "lstat", Path: r.Path, Err: fs.ErrNotExist}
	}
	return r.Path, nil
}
