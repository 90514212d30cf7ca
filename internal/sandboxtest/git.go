package sandboxtest

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"
)

// Git runs the host's git in dir with a configuration of its own (no
// system or user config, every directory safe, file:// submodules
// allowed, branch main, a fixed identity) and returns its combined
// output and whether it succeeded. It is bounded by 30 seconds; a git
// that is not installed is a failure like any other (the caller checks
// exec.LookPath first and says Unavailable).
func Git(t testing.TB, dir string, args ...string) (string, bool) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c := exec.CommandContext(ctx, "git", args...)
	c.Dir = dir
	c.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + t.TempDir(), "GIT_CONFIG_NOSYSTEM=1",
		"GIT_CONFIG_COUNT=4", "GIT_CONFIG_KEY_0=safe.directory", "GIT_CONFIG_VALUE_0=*",
		"GIT_CONFIG_KEY_1=protocol.file.allow", "GIT_CONFIG_VALUE_1=always",
		"GIT_CONFIG_KEY_2=init.defaultBranch", "GIT_CONFIG_VALUE_2=main",
		"GIT_CONFIG_KEY_3=advice.detachedHead", "GIT_CONFIG_VALUE_3=false",
		"GIT_AUTHOR_NAME=t", "GIT_AUTHOR_EMAIL=t@t", "GIT_COMMITTER_NAME=t", "GIT_COMMITTER_EMAIL=t@t"}
	out, err := c.CombinedOutput()
	return string(out), err == nil
}

// WriteFile writes s to p, making p's parent directories (0755) first;
// the file is 0644. A failure fails t.
func WriteFile(t testing.TB, p, s string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(s), 0o644); err != nil {
		t.Fatal(err)
	}
}
