package sandbox

import (
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/sandbox-run/sandbox-run/policy"
)

// explainNotFound fills in why a command that was not found inside exists
// on the host, and the fix: the host's own PATH (as lookup gives it) is
// searched for name, and when it is there the reason says whether its
// directory is missing from the sandbox's PATH, from the sandbox's view
// (shown, nil when the mechanism cannot say), or both. A name with a slash,
// or one the host does not have either, keeps "command not found".
func explainNotFound(e *ExecError, p policy.Policy, lookup func(string) (string, bool), shown func(string) bool) {
	if e.Code != ExitNotFound || strings.Contains(e.Command, "/") || lookup == nil {
		return
	}
	hostPATH, _ := lookup("PATH")
	hp := onPath(e.Command, hostPATH)
	if hp == "" {
		return
	}
	inside := ""
	if env, err := p.Environ(lookup); err == nil {
		for _, kv := range env {
			if v, ok := strings.CutPrefix(kv, "PATH="); ok {
				inside = v
			}
		}
	}
	dir := filepath.Dir(hp)
	onInside := slices.Contains(filepath.SplitList(inside), dir)
	pathDir := dir
	visible := shown == nil || shown(hp)
	if r, err := filepath.EvalSymlinks(hp); err == nil && shown != nil && !shown(r) {
		// The name is shown, the file it links to is not.
		visible, dir = false, filepath.Dir(r)
	}
	var why, fix []string
	if !onInside {
		why = append(why, "its directory "+pathDir+" is not on the sandbox's PATH ("+inside+")")
		fix = append(fix, "--env PATH="+pathDir+":"+inside)
	}
	if !visible {
		why = append(why, dir+" is not shown inside the sandbox")
		fix = append(fix, "--read "+dir+" (or the whole installation it belongs to)")
	}
	if shown == nil && onInside {
		why = append(why, "the sandbox may not show "+dir)
		fix = append(fix, "--read "+dir)
	}
	if len(why) == 0 {
		// On the PATH and shown, yet not found inside: the host's
		// file changed, or the mechanism hides it in a way not modelled.
		return
	}
	e.Reason = "command not found inside the sandbox; the host has it at " + hp + ", but " + strings.Join(why, ", and ")
	e.Fix = strings.Join(fix, " and ") + toolchainHint(e.Command, pathDir, !onInside)
}

// toolchainHint adds to a not-found fix what --dev-env (on by default)
// would have done for dir, and the --cache that goes with the command.
func toolchainHint(cmd, dir string, offPath bool) string {
	var h string
	if offPath {
		h += " (--dev-env, on unless --dev-env=false, puts known toolchain directories such as " + dir + " on PATH when the sandbox's uid can reach them)"
	}
	if m, ok := policy.CommandOf(cmd); ok {
		h += "; add --cache " + m.Name + " to keep its downloads between runs"
	}
	return h
}

// onPath returns the first executable regular file name in the absolute
// directories of path, "" when there is none.
func onPath(name, path string) string {
	for _, d := range filepath.SplitList(path) {
		if d == "" || !filepath.IsAbs(d) {
			continue
		}
		c := filepath.Join(d, name)
		fi, err := os.Stat(c)
		if err == nil && fi.Mode().IsRegular() && fi.Mode()&0o111 != 0 {
			return c
		}
	}
	return ""
}
