package plan

import (
	"os"
	"path/filepath"
	"reflect"
	"testing"

	"github.com/sandbox-run/sandbox-run/mount"
	"github.com/sandbox-run/sandbox-run/policy"
)

// TestImageMounts: the host's system paths give way to the image's
// top-level entries; an entry on the way to a plan destination is a
// directory of the bundle holding its entries (no mount point is ever
// made in the shared tree); /proc, /dev, /sys and /tmp stay the
// sandbox's own.
func TestImageMounts(t *testing.T) {
	root := t.TempDir()
	for _, d := range []string{"usr/bin", "etc", "run/lock", "home/u", "proc", "tmp"} {
		os.MkdirAll(filepath.Join(root, d), 0o755)
	}
	os.WriteFile(filepath.Join(root, "etc/passwd"), nil, 0o644)
	os.Symlink("usr/bin", filepath.Join(root, "bin"))
	os.Symlink("../x", filepath.Join(root, "run/link"))
	mounts := []mount.Step{
		{Kind: mount.ROBind, Src: "/usr", Dst: "/usr", FD: -1},
		{Kind: mount.Symlink, Src: "usr/lib", Dst: "/lib", FD: -1},
		{Kind: mount.Proc, Dst: "/proc", FD: -1},
		{Kind: mount.Bind, Src: "/home/u/work", Dst: "/home/u/work", FD: -1},
		{Kind: mount.ROBind, Src: "/self", Dst: "/run/sandbox-run/init", FD: -1},
	}
	got, err := ImageMounts(root, mounts)
	if err != nil {
		t.Fatal(err)
	}
	want := []mount.Step{
		{Kind: mount.Symlink, Src: "usr/bin", Dst: "/bin", FD: -1},
		{Kind: mount.ROBind, Src: root + "/etc", Dst: "/etc", FD: -1},
		{Kind: mount.Dir, Dst: "/home", FD: -1},
		{Kind: mount.Dir, Dst: "/home/u", FD: -1},
		{Kind: mount.Dir, Dst: "/run", FD: -1},
		{Kind: mount.Symlink, Src: "../x", Dst: "/run/link", FD: -1},
		{Kind: mount.ROBind, Src: root + "/run/lock", Dst: "/run/lock", FD: -1},
		{Kind: mount.ROBind, Src: root + "/usr", Dst: "/usr", FD: -1},
		mounts[2], mounts[3], mounts[4],
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("imageMounts:\n got %v\nwant %v", got, want)
	}
}

// TestImageEnv: the image's variables replace sandbox-run's defaults but
// never what the policy names.
func TestImageEnv(t *testing.T) {
	p := policy.Policy{Env: map[string]string{"LANG": "C"}, PassEnv: []string{"TERM"}}
	env := []string{"HOME=/tmp", "LANG=C", "PATH=/usr/bin:/bin", "TERM=xterm"}
	got := ImageEnv(env, []string{"PATH=/opt/bin", "LANG=de", "TERM=dumb", "NEW=1", "bad", "=x"}, p)
	want := []string{"HOME=/tmp", "LANG=C", "NEW=1", "PATH=/opt/bin", "TERM=xterm"}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("imageEnv = %v, want %v", got, want)
	}
}
