package sandbox

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sandbox-run/sandbox-run/policy"
)

// TestCheckHost: a writable dir that is the home, holds it, lies in one
// of its dot-directories or in sandbox-run's cache is refused, at either
// spelling; a project directory in the home is not.
func TestCheckHost(t *testing.T) {
	tmp, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	home := filepath.Join(tmp, "home")
	cache := filepath.Join(tmp, "xdg", "sandbox-run")
	for _, d := range []string{"home/.config/app", "home/.ssh", "home/proj", "xdg/sandbox-run/runs", "elsewhere"} {
		if err := os.MkdirAll(filepath.Join(tmp, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Symlink(filepath.Join(home, ".ssh"), filepath.Join(tmp, "elsewhere", "keys")); err != nil {
		t.Fatal(err)
	}
	t.Setenv("HOME", home)
	opts := Options{BwrapCache: cache}
	for _, tt := range []struct {
		workdir string
		write   []string
		refused bool
	}{
		{workdir: home + "/proj"},
		{workdir: home, refused: true},
		{workdir: tmp, refused: true},
		{workdir: home + "/.config/app", refused: true},
		{workdir: home + "/proj", write: []string{home + "/.ssh"}, refused: true},
		{workdir: tmp + "/elsewhere/keys", refused: true}, // resolves into ~/.ssh
		{workdir: cache + "/runs", refused: true},
		{workdir: tmp + "/xdg", refused: true},
	} {
		p := policy.Policy{Workdir: tt.workdir, Write: tt.write}
		err := checkHost(p, opts)
		if (err != nil) != tt.refused || (err != nil && (!errors.Is(err, policy.ErrInvalid) || !strings.Contains(err.Error(), "fix: "))) {
			t.Errorf("workdir %s write %v: %v, want refused %v", tt.workdir, tt.write, err, tt.refused)
		}
	}
}
