package seatbelt

import (
	"path/filepath"
	"slices"
	"strings"

	"github.com/sandbox-run/sandbox-run/policy"
)

// The protected paths are matched with regular expressions, not subpath
// filters, for two reasons:
//
//   - APFS and HFS+ are case-insensitive by default: ".GIT/hooks" and
//     ".MCP.json" name the files git and the agents read, but a subpath
//     filter compares bytes. Every letter of a protected name is matched
//     as [xX]. The writable root's own spelling is matched as written: the
//     allow rule for the root compares the same bytes, so a case variant of
//     the root is not writable at all.
//   - Git reads metadata from any repository at any depth, and from a .git
//     file (a "gitfile": "gitdir: PATH"), its commondir, its modules and
//     worktrees; a list of paths made at start cannot name the ones the
//     command creates during the run. One expression per writable root
//     holds them wherever they appear below it.
//
// The private TMPDIR is not a writable root here: git metadata there dies
// with the run, and `git init` or `git clone` into TMPDIR keeps working.
// Inside the writable roots they fail, since a new repository's config
// cannot be written (docs/seatbelt.md).

// gitHeld are the parts of a git directory that are never written: every
// setting that can make host git run a program (config, config.worktree,
// hooks, info/attributes with its filter and diff drivers), the files that
// redirect git to another directory (commondir, gitdir), and info itself so
// that it cannot be swapped for a directory of the command's. Refs,
// objects, the index, HEAD and logs stay writable: commit, branch and
// checkout need them.
var gitHeld = []string{"config", "config.worktree", "commondir", "gitdir", "hooks", "info", "info/attributes"}

// gitSubdirs hold further git directories: one per submodule under
// modules/ (at any depth: a submodule's own submodules, names with '/'),
// one per linked worktree under worktrees/.
const (
	gitModules   = "modules"
	gitWorktrees = "worktrees"
)

// gitDataDirs are the parts of a submodule's git directory whose
// directories git creates during normal work; every other directory under
// modules/ may be a submodule's git directory and is held from being
// created, removed or renamed (a prepared directory renamed into place
// would bring its own config without writing it there).
var gitDataDirs = []string{"objects", "refs", "logs", "lfs"}

// ciRegex writes s as a regular expression that matches it with every
// ASCII letter in either case and every other byte literally.
func ciRegex(s string) string {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c >= 'a' && c <= 'z':
			b.Write([]byte{'[', c, c - 'a' + 'A', ']'})
		case c >= 'A' && c <= 'Z':
			b.Write([]byte{'[', c - 'A' + 'a', c, ']'})
		default:
			b.WriteString(regexLiteral(s[i : i+1]))
		}
	}
	return b.String()
}

// regexLiteral escapes the metacharacters of POSIX extended regular
// expressions (the dialect of Seatbelt's regex filter), so s matches
// itself. A multi-byte UTF-8 character is written as its bytes, which
// match themselves.
func regexLiteral(s string) string {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if strings.IndexByte(`\.^$*+?()[]{}|`, s[i]) >= 0 {
			b.WriteByte('\\')
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

// ciAlt is an alternation of names, each case-insensitive.
func ciAlt(names []string) string {
	parts := make([]string, len(names))
	for i, n := range names {
		parts[i] = ciRegex(n)
	}
	return "(" + strings.Join(parts, "|") + ")"
}

// gitAnchors returns the expressions that match a git directory as a path
// prefix for writable root w: any .git at any depth below w, and, when w
// itself lies in a git directory (--write of a worktree's main .git, or of
// something inside it), that git directory.
func gitAnchors(w string) []string {
	anchors := []string{"^" + rootRegex(w) + "(/.*)?/" + ciRegex(".git")}
	parts := strings.Split(w, "/")
	for i := len(parts) - 1; i > 0; i-- {
		if strings.EqualFold(parts[i], ".git") {
			anchors = append(anchors, "^"+regexLiteral(strings.Join(parts[:i+1], "/")))
			break
		}
	}
	return anchors
}

// gitRules holds git's metadata below each writable root.
func gitRules(writable []string, tag string, rule func(...node)) {
	held := ciAlt(gitHeld)
	sub := "((" + ciRegex(gitModules) + "/.+|" + ciRegex(gitWorktrees) + "/[^/]+)/)?"
	deny := func(filter node) {
		rule(sym("deny"), sym("file-write*"), filter, withMessage(tag))
	}
	for _, w := range writable {
		for _, a := range gitAnchors(w) {
			// The .git entry itself: no gitfile created or rewritten, no
			// repository renamed, removed or replaced by a link.
			deny(list(sym("regex"), str(a+"$")))
			// The held files of the repository, its submodules and its
			// linked worktrees, and whatever lies below a held directory.
			deny(list(sym("regex"), str(a+"/"+sub+held+"(/.*)?$")))
			// modules/ and worktrees/ themselves, and each worktree's
			// directory.
			deny(list(sym("regex"), str(a+"/("+ciRegex(gitModules)+"|"+ciRegex(gitWorktrees)+"(/[^/]+)?)$")))
			// A submodule's git directory (any directory under modules/
			// that is not one of its data directories).
			rule(sym("deny"), sym("file-write*"), list(sym("require-all"),
				list(sym("regex"), str(a+"/"+ciRegex(gitModules)+"/.+$")),
				list(sym("vnode-type"), sym("DIRECTORY")),
				list(sym("require-not"), list(sym("regex"), str(a+"/"+ciRegex(gitModules)+"/.+/"+ciAlt(gitDataDirs)+"(/.*)?$")))),
				withMessage(tag))
		}
	}
}

// isGitName reports whether a protected name lies in a .git directory,
// which gitRules already holds at any depth.
func isGitName(name string) bool {
	first, _, _ := strings.Cut(name, "/")
	return strings.EqualFold(first, ".git")
}

// protectedRules denies writes to each protected path, in any letter case,
// and the renaming, removal or replacement by a symbolic link of the
// directories that lead to one (config for config/secrets). protected
// holds absolute paths; those outside every writable root need no rule
// beyond the default deny, but get a literal one to say so in the log.
func protectedRules(writable, protected []string, tag string, rule func(...node), comment func(string)) {
	var between []string
	comment("Protected paths: never written, in any letter case, whether they exist or not.")
	for _, pr := range protected {
		w := rootOf(pr, writable)
		if w == "" {
			rule(sym("deny"), sym("file-write*"), list(sym("subpath"), str(pr)), withMessage(tag))
			continue
		}
		rel := strings.TrimPrefix(pr, strings.TrimSuffix(w, "/")+"/")
		if pr == w || isGitName(rel) {
			continue
		}
		rule(sym("deny"), sym("file-write*"),
			list(sym("regex"), str("^"+rootRegex(w)+"/"+ciRegex(rel)+"(/.*)?$")), withMessage(tag))
		for d := filepath.Dir(rel); d != "."; d = filepath.Dir(d) {
			between = append(between, "^"+rootRegex(w)+"/"+ciRegex(d)+"$")
		}
	}
	slices.Sort(between)
	between = slices.Compact(between)
	if len(between) > 0 {
		comment("The directories that lead to protected paths: not renamed, removed or made a symbolic link.")
		for _, re := range between {
			rule(sym("deny"), sym("file-write-unlink"), list(sym("regex"), str(re)), withMessage(tag))
			rule(sym("deny"), sym("file-write-create"),
				list(sym("require-all"), list(sym("regex"), str(re)), list(sym("vnode-type"), sym("SYMLINK"))),
				withMessage(tag))
		}
	}
	comment("Git metadata below every writable directory, at any depth (see protect.go).")
	gitRules(writable, tag, rule)
}

// rootRegex matches the writable root w as written; for "/" it is empty,
// so that appending "/name" gives "/name".
func rootRegex(w string) string {
	if w == "/" {
		return ""
	}
	return regexLiteral(w)
}

// rootOf returns the innermost writable root that holds p, or "".
func rootOf(p string, writable []string) string {
	best := ""
	for _, w := range writable {
		if policy.Within(p, w) && len(w) > len(best) {
			best = w
		}
	}
	return best
}
