package bwrap

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"

	"github.com/sandbox-run/sandbox-run/internal/plan"
	"github.com/sandbox-run/sandbox-run/mount"
	"github.com/sandbox-run/sandbox-run/pathguard"
	"github.com/sandbox-run/sandbox-run/policy"
)

// gitHintDir is where, inside the sandbox, git's hint wrapper is found
// first on PATH. It lies in bwrap's own root tmpfs: nothing on the host.
const gitHintDir = "/.sandbox-run/bin"

// gitHintScript runs the real git and, when a command that writes a
// repository's config fails because sandbox-run holds that config
// read-only, says why and what to use instead: git's own message is a bare
// "Device or resource busy". It is a message, not a protection: the
// command can bypass it (/usr/bin/git), and nothing depends on it.
//
// "git init [-q] [DIR]" in an existing repository whose config is held
// (re-init rewrites the config, which the hold refuses) is first run on a
// scratch copy of that repository's held parts (config, hooks), made in
// the sandbox's /tmp. When the copy comes out byte for byte the same, the
// re-init would change nothing held: the wrapper makes what re-init makes
// outside the held parts (missing description, info/exclude, branches),
// prints git's own line and succeeds. Otherwise it fails (exit 128, as
// git's own failure) with one line naming the repository and the way out;
// nothing is written. Any other form of git init (another option, -C, -c)
// goes to git as it is.
const gitHintScript = `#!/bin/sh
# sandbox-run: runs git; explains a refused write to a held .git/config;
# re-runs git init in an existing repository only when it changes nothing held.
PATH=${PATH#` + gitHintDir + `:}
export PATH
reinit() {
	q= dir=.
	for a in "$@"; do
		case $a in
		-q|--quiet) q=1 ;;
		-*) return 0 ;;
		*) dir=$a ;;
		esac
	done
	wt=$(cd "$dir" 2>/dev/null && pwd -P) || return 0
	gd=$(cd "$wt" && git rev-parse --absolute-git-dir 2>/dev/null) || return 0
	c="$gd/config"
	[ "$gd" = "$wt/.git" ] && [ -f "$c" ] && [ ! -w "$c" ] || return 0
	s=$(mktemp -d) || return 0
	mkdir -p "$s/.git/objects" "$s/.git/refs" && cp -p "$c" "$gd/HEAD" "$s/.git/" &&
		{ [ ! -d "$gd/hooks" ] || cp -Rp "$gd/hooks" "$s/.git/"; } &&
		git -C "$s" init -q >/dev/null 2>&1 || { rm -rf "$s"; return 0; }
	same=1
	cmp -s "$c" "$s/.git/config" || same=
	if [ -d "$gd/hooks" ]; then diff -r "$gd/hooks" "$s/.git/hooks" >/dev/null 2>&1 || same=; fi
	if [ -z "$same" ]; then
		rm -rf "$s"
		echo "sandbox-run: git init: re-initialising $gd would change its config or hooks, which are held read-only here (settings there can make git run a program on the host); fix: leave the existing repository as it is, or run git init outside the sandbox" >&2
		exit 128
	fi
	for f in description branches info; do
		[ -e "$gd/$f" ] || cp -Rp "$s/.git/$f" "$gd/$f" 2>/dev/null
	done
	[ -e "$gd/info/exclude" ] || cp -p "$s/.git/info/exclude" "$gd/info/exclude" 2>/dev/null
	rm -rf "$s"
	[ -n "$q" ] || echo "Reinitialized existing Git repository in $gd/"
	exit 0
}
[ "$1" = init ] && { shift; reinit "$@"; set -- init "$@"; }
git "$@"
s=$?
[ $s -eq 0 ] && exit 0
hint=
for a in "$@"; do
	case $a in
	--global|--system|--file|--file=*|-f|--blob|--blob=*) exit $s ;;
	config|init|remote|submodule) hint=1 ;;
	esac
done
if [ -n "$hint" ]; then
	c=$(git rev-parse --git-path config 2>/dev/null)
	if [ -f "$c" ] && [ ! -w "$c" ]; then
		echo "sandbox-run: $c is held read-only (settings there can make git run a program on the host); use git config --global (this session's \$HOME/.gitconfig) or git -c NAME=VALUE for one command" >&2
	fi
fi
exit $s
`

// bindGitHint puts the hint wrapper at gitHintDir/git, bound read-only
// from one file per host user that the sandbox's user can reach: in the
// cache for an unprivileged user (the sandbox runs as that user), in
// /run/sandbox-run for root (the sandbox runs as another uid, which cannot
// reach root's cache). Nothing of it is made per run. It is left out, with
// no loss of protection, when the policy sets PATH itself, when git is not
// there, or when anything in the way fails.
func bindGitHint(pl *plan.Plan, p policy.Policy, env []string, cache string, uid, gid int) []string {
	if _, ok := p.Env["PATH"]; ok {
		return env
	}
	if _, err := os.Stat("/usr/bin/git"); err != nil {
		return env
	}
	rv := pl.Guard.Resolver()
	path, err := gitHintSource(rv, cache)
	if err != nil || plan.AccessibleVia(rv, path, uid, gid, false, nil) != nil {
		return env
	}
	r, err := pl.Guard.CheckRead(path)
	if err != nil || !r.Exists || pl.Bind(mount.ROBind, r, filepath.Join(gitHintDir, "git")) != nil {
		return env
	}
	out := make([]string, len(env))
	for i, kv := range env {
		if v, ok := strings.CutPrefix(kv, "PATH="); ok {
			kv = "PATH=" + gitHintDir + ":" + v
		}
		out[i] = kv
	}
	pl.Notes = append(pl.Notes, "git on PATH is "+gitHintDir+"/git, which runs /usr/bin/git and explains a refused write to a held .git/config")
	return out
}

// viaGitHint is what the trampoline starts for a command named name that
// resolved to resolved: the hint wrapper when the command is git found on
// PATH (not named by path) and the wrapper is bound (first on env's PATH),
// so that "sandbox-run run -- git config ..." explains a held config as
// "sh -c 'git config ...'" does.
func viaGitHint(name, resolved string, env []string) string {
	if name != "git" || resolved != "/usr/bin/git" {
		return resolved
	}
	for _, kv := range env {
		if v, ok := strings.CutPrefix(kv, "PATH="); ok && strings.HasPrefix(v, gitHintDir+":") {
			return gitHintDir + "/git"
		}
	}
	return resolved
}

// gitHintSource returns the host file holding gitHintScript. Its name
// carries a digest of the script, and it is published with link(2), which
// never replaces: a file a run has opened to bind is never unlinked under
// it by a parallel run writing the same script or a newer binary writing
// another (bwrap before 0.9 resolves a descriptor's path before it binds,
// and fails on a deleted one). Its directory must be this user's own and
// no link. Existing files are looked up through rv, the plan's memo, so
// that the bind's checks that follow find them there.
func gitHintSource(rv *pathguard.Resolver, cache string) (string, error) {
	if os.Geteuid() == 0 {
		return publishGitHint(rv, "/run/sandbox-run", 0o755)
	}
	if cache == "" {
		return "", os.ErrNotExist
	}
	return publishGitHint(rv, filepath.Join(cache, "bin"), 0o700)
}

// publishGitHint is gitHintSource in dir, made with mode when missing.
func publishGitHint(rv *pathguard.Resolver, dir string, mode os.FileMode) (string, error) {
	fi, err := rv.Lstat(dir)
	if errors.Is(err, fs.ErrNotExist) {
		if err := os.MkdirAll(dir, mode); err != nil {
			return "", err
		}
		fi, err = rv.Lstat(dir)
	}
	if err != nil {
		return "", err
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok || !fi.IsDir() || int(st.Uid) != os.Geteuid() || fi.Mode().Perm()&0o022 != 0 {
		return "", fmt.Errorf("%s is not a directory of this user's, closed to others", dir)
	}
	sum := sha256.Sum256([]byte(gitHintScript))
	path := filepath.Join(dir, "git-hint-"+hex.EncodeToString(sum[:6]))
	if isGitHint(rv, path) {
		return path, nil
	}
	tmp, err := os.CreateTemp(dir, ".git-hint-*")
	if err != nil {
		return "", err
	}
	defer os.Remove(tmp.Name())
	_, werr := tmp.WriteString(gitHintScript)
	if err := tmp.Chmod(0o755); werr == nil {
		werr = err
	}
	if err := tmp.Close(); werr == nil {
		werr = err
	}
	if werr != nil {
		return "", werr
	}
	if err := os.Link(tmp.Name(), path); err != nil && !errors.Is(err, fs.ErrExist) {
		return "", err
	}
	// Ours, or a parallel run's with the same name: either way, the script.
	if !isGitHint(rv, path) {
		return "", fmt.Errorf("%s is not the hint wrapper", path)
	}
	return path, nil
}

// isGitHint reports whether path is a regular file, mode 0755, holding
// gitHintScript.
func isGitHint(rv *pathguard.Resolver, path string) bool {
	fi, err := rv.Lstat(path)
	if err != nil || !fi.Mode().IsRegular() || fi.Mode().Perm() != 0o755 {
		return false
	}
	b, err := os.ReadFile(path)
	return err == nil && string(b) == gitHintScript
}
