package sandbox

import (
	"os"
	"path/filepath"
	"strings"

	"github.com/sandbox-run/sandbox-run/bwrap"
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
const gitHintScript = `#!/bin/sh
# sandbox-run: runs git; explains a refused write to a held .git/config.
PATH=${PATH#` + gitHintDir + `:}
export PATH
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

// bindGitHint puts the hint wrapper at gitHintDir/git: written into a
// fresh directory of the host's TMPDIR that the sandbox's user can reach
// (the cache may not be, as root), bound read-only, and removed by the
// returned func once the run is over. It is left out, with no loss of
// protection, when the policy sets PATH itself, when git is not there, or
// when anything in the way fails.
func (pl *plan) bindGitHint(p policy.Policy, env []string, uid, gid int) ([]string, func()) {
	none := func() {}
	if _, ok := p.Env["PATH"]; ok {
		return env, none
	}
	if _, err := os.Stat("/usr/bin/git"); err != nil {
		return env, none
	}
	dir, err := os.MkdirTemp("", "sandbox-run-git-")
	if err != nil {
		return env, none
	}
	done := func() { os.RemoveAll(dir) }
	path := filepath.Join(dir, "git")
	if os.Chmod(dir, 0o755) != nil || os.WriteFile(path, []byte(gitHintScript), 0o755) != nil ||
		os.Chmod(path, 0o755) != nil || accessibleAs(path, uid, gid, false, nil) != nil {
		done()
		return env, none
	}
	r, err := pl.guard.CheckRead(path)
	if err != nil || !r.Exists || pl.bind(bwrap.ROBind, r, filepath.Join(gitHintDir, "git")) != nil {
		done()
		return env, none
	}
	out := make([]string, len(env))
	for i, kv := range env {
		if v, ok := strings.CutPrefix(kv, "PATH="); ok {
			kv = "PATH=" + gitHintDir + ":" + v
		}
		out[i] = kv
	}
	pl.notes = append(pl.notes, "git on PATH is "+gitHintDir+"/git, which runs /usr/bin/git and explains a refused write to a held .git/config")
	return out, done
}
