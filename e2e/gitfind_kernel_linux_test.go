package e2e

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sandbox-run/sandbox-run/internal/sandboxtest"
)

// The sweep reads a repository as git does: each attack below leaves, in
// the workdir, a repository whose config runs a program on the host's next
// `git status` there, in a place that git's own discovery reaches and a
// sweep that does not follow git's rules misses.

// gitAttack is one such attack: setup prepares the workdir on the host,
// script plants the repository (run in the workdir, as the command), and
// judge is where the user then runs `git status`.
type gitAttack struct {
	name   string
	setup  func(t *testing.T, w string)
	script func(w, marker string) string
	judge  string
}

// fsmonitorConfig is a whole config whose core.fsmonitor touches marker.
func fsmonitorConfig(marker string) string {
	return fmt.Sprintf(`printf '[core]\n\trepositoryformatversion = 0\n\tfsmonitor = "touch %s; false"\n'`, marker)
}

func gitAttacks() []gitAttack {
	none := func(*testing.T, string) {}
	return []gitAttack{
		{name: "commondir names a directory of objects, refs and config", setup: none,
			// a/x/.git holds only HEAD and commondir; evil holds what git
			// reads from the common directory, config included.
			script: func(w, m string) string {
				return `mkdir -p a/x/.git evil/objects evil/refs && echo 'ref: refs/heads/main' > a/x/.git/HEAD && echo ../../../evil > a/x/.git/commondir && ` +
					fsmonitorConfig(m) + ` > evil/config`
			},
			judge: "a/x"},
		{name: "gitdir through a link and .. to a linked HEAD", setup: none,
			// git resolves ../lnk/../gd to real/gd; a lexical clean
			// gives gd, which is not there.
			script: func(w, m string) string {
				return `mkdir -p real/sub real/gd/objects real/gd/refs/heads wt && ln -s ` + w + `/real/sub lnk && ln -s refs/heads/main real/gd/HEAD && ` +
					fsmonitorConfig(m) + ` > real/gd/config && echo 'gitdir: ../lnk/../gd' > wt/.git`
			},
			judge: "wt"},
		{name: "gitlink added to an existing repository's index",
			setup: func(t *testing.T, w string) {
				hostGit(t, w, "init", "-q")
				hostGit(t, w, "commit", "-q", "--allow-empty", "-m", "init")
			},
			// No .gitmodules: git status recurses into every populated
			// gitlink of the index, and the submodule's config is its own.
			// sm/../lnk/../sm is .git/modules/sm to git, sm to a lexical
			// clean.
			script: func(w, m string) string {
				return `H=$(git rev-parse HEAD) && git update-index --add --cacheinfo 160000,$H,sm && ` +
					`mkdir -p sm .git/modules/sm/objects .git/modules/sm/refs/heads && ln -s refs/heads/main .git/modules/sm/HEAD && ` +
					fsmonitorConfig(m) + ` > .git/modules/sm/config && mkdir .git/modules/x && ln -s ` + w + `/.git/modules/x lnk && echo 'gitdir: ../lnk/../sm' > sm/.git`
			},
			judge: "."},
	}
}

// plainBwrap runs sh -c script in w under a bare bwrap that binds the
// whole host: a sandbox with no sweep, the control.
func plainBwrap(t *testing.T, w, script string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	c := exec.CommandContext(ctx, sandboxtest.Bwrap(t), "--dev-bind", "/", "/", "--chdir", w, "--", "sh", "-c", script)
	// The repository is the sandbox uid's when the test is root: the
	// command's git here, as root, needs the same opening as hostGit's.
	c.Env = append(os.Environ(), "GIT_CONFIG_COUNT=1", "GIT_CONFIG_KEY_0=safe.directory", "GIT_CONFIG_VALUE_0=*")
	if out, err := c.CombinedOutput(); err != nil {
		t.Fatalf("control: the attack failed under a plain bwrap: %v: %s", err, out)
	}
}

// TestSweepReadsGitAsGitDoes: each attack, run as the command of
// `sandbox-run run` on a fresh workdir; after the run, the user's own git
// status in the judged directory does not run the planted program.
// Control: the same script under a plain bwrap, then the same git status,
// runs it. As root the command runs as uid 65534, whose repositories git
// would refuse on its own (safe.directory): hostGit opens safe.directory,
// as a user does for their own files, so the test means the same as root
// and as a user.
func TestSweepReadsGitAsGitDoes(t *testing.T) {
	needBwrap(t)
	needGit(t)
	for _, a := range gitAttacks() {
		t.Run(a.name, func(t *testing.T) {
			t.Parallel()
			try := func(sandboxed bool) (bool, result) {
				w := sandboxtest.WorkDir(t)
				a.setup(t, w)
				chownAll(t, w)
				marker := filepath.Join(t.TempDir(), "ran")
				os.Chmod(filepath.Dir(marker), 0o777)
				var r result
				if sandboxed {
					r = inSandbox(t, cacheEnv(t), w, a.script(w, marker))
					if r.code != 0 {
						t.Fatalf("exit %d: %s", r.code, r.stderr)
					}
				} else {
					plainBwrap(t, w, a.script(w, marker))
				}
				if _, err := os.Stat(marker); err == nil {
					t.Fatal("the program ran before git status (the test is broken)")
				}
				hostGit(t, filepath.Join(w, a.judge), "status")
				_, err := os.Stat(marker)
				return err == nil, r
			}
			if ran, _ := try(false); !ran {
				t.Fatal("control: under a plain bwrap, the host's git status did not run the planted program (untested)")
			}
			if ran, r := try(true); ran {
				t.Errorf("the host's git status ran the planted program after a sandboxed run; stderr:\n%s", r.stderr)
			} else if !strings.Contains(r.stderr, "quarantined") {
				t.Errorf("nothing quarantined on stderr: %s", r.stderr)
			}
		})
	}
}
