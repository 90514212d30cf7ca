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

// TestCheckHostShared: in /tmp a writable dir is accepted only when the
// directory directly in /tmp is the caller's alone; /tmp and /run/user are
// refused outright.
func TestCheckHostShared(t *testing.T) {
	top, err := os.MkdirTemp("/tmp", "sbx-shared-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(top) })
	sub := filepath.Join(top, "job")
	if err := os.Mkdir(sub, 0o755); err != nil {
		t.Fatal(err)
	}
	link := top + "-link"
	if err := os.Symlink(top, link); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.Remove(link) })
	check := func(d string) error {
		return checkHost(policy.Policy{Workdir: d}.WithDefaults(), Options{})
	}
	// Positive control: the caller's own 0700 directory is accepted.
	if err := check(sub); err != nil {
		t.Fatalf("own directory in /tmp refused: %v", err)
	}
	for _, d := range []string{"/tmp", "/var/tmp", "/dev/shm", "/run/user/1000"} {
		if err := check(d); !errors.Is(err, policy.ErrInvalid) || !strings.Contains(err.Error(), "fix: ") {
			t.Errorf("%s: %v, want refused with a fix", d, err)
		}
	}
	if err := check(link + "/job"); err == nil || !strings.Contains(err.Error(), "not yours alone") {
		t.Errorf("through a link in /tmp: %v, want refused", err)
	}
	if err := os.Chmod(top, 0o777); err != nil {
		t.Fatal(err)
	}
	if err := check(sub); err == nil || !strings.Contains(err.Error(), "others may write it") {
		t.Errorf("world-writable top: %v, want refused", err)
	}
	if err := os.Chmod(top, 0o755); err != nil {
		t.Fatal(err)
	}
	if os.Geteuid() != 0 {
		return
	}
	// As root the sandbox's uid counts as the caller's; another uid does not.
	if err := os.Chown(top, 65534, 65534); err != nil {
		t.Fatal(err)
	}
	if err := check(sub); err != nil {
		t.Errorf("top owned by the sandbox's uid: %v, want accepted", err)
	}
	if err := os.Chown(top, 12345, 12345); err != nil {
		t.Fatal(err)
	}
	if err := check(sub); err == nil || !strings.Contains(err.Error(), "owned by uid 12345") {
		t.Errorf("top owned by uid 12345: %v, want refused", err)
	}
}
