package pathguard

import (
	"errors"
	"io/fs"
	"os"
	"os/exec"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/sandbox-run/sandbox-run/internal/sandboxtest"
)

// TestMain fails the run if a test leaked a descriptor: a leaked O_PATH fd
// is exactly what must not cross into a sandbox.
func TestMain(m *testing.M) {
	os.Exit(sandboxtest.RunLeakChecked(m))
}

// sameInode fails unless f is the inode at path p (followed by the kernel).
func sameInode(t *testing.T, f *os.File, p string) {
	t.Helper()
	var got unix.Stat_t
	if err := unix.Fstat(int(f.Fd()), &got); err != nil {
		t.Fatal(err)
	}
	var want unix.Stat_t
	if err := unix.Stat(p, &want); err != nil {
		t.Fatal(err)
	}
	if got.Dev != want.Dev || got.Ino != want.Ino {
		t.Errorf("fd is %d:%d, %s is %d:%d", got.Dev, got.Ino, p, want.Dev, want.Ino)
	}
}

func TestOpen(t *testing.T) {
	for _, open := range []struct {
		name string
		fn   func(string, int) (int, error)
	}{{"openat2", openNoSymlinks}, {"openat walk", openWalk}} {
		t.Run(open.name, func(t *testing.T) {
			root := tempRoot(t)
			build(t, root, "d/", "d/f", "e/", "e/f", "l => d")
			// The path as the walk resolved it opens to the same inode.
			for _, p := range []string{"/", root, at(root, "d"), at(root, "d/f")} {
				fd, err := open.fn(p, 0)
				if err != nil {
					t.Fatalf("%s: %v", p, err)
				}
				f := os.NewFile(uintptr(fd), p)
				sameInode(t, f, p)
				fl, _ := unix.FcntlInt(f.Fd(), unix.F_GETFL, 0)
				fd0, _ := unix.FcntlInt(f.Fd(), unix.F_GETFD, 0)
				if fl&unix.O_PATH == 0 || fd0&unix.FD_CLOEXEC == 0 {
					t.Errorf("%s: flags %#x fd flags %#x; want O_PATH and FD_CLOEXEC", p, fl, fd0)
				}
				f.Close()
			}
			// A link in the middle is never followed.
			if fd, err := open.fn(at(root, "l/f"), 0); err == nil {
				unix.Close(fd)
				t.Errorf("opened %s through a link", at(root, "l/f"))
			} else if !errors.Is(err, syscall.ELOOP) && !errors.Is(err, syscall.ENOTDIR) {
				t.Errorf("link in the middle: %v; want ELOOP or ENOTDIR", err)
			}
		})
	}
}

func TestOpenVerifiesTheCheckedInode(t *testing.T) {
	tests := []struct {
		name    string
		path    string // walked, then the swap, then Open
		swap    func(root string) error
		wantErr error
	}{
		{name: "no change", path: "d/f", swap: func(string) error { return nil }},
		{name: "file replaced", path: "d/f", wantErr: ErrChanged,
			swap: func(root string) error { return os.Rename(at(root, "e/f"), at(root, "d/f")) }},
		{name: "file replaced by a link", path: "d/f", wantErr: ErrChanged,
			swap: func(root string) error {
				if err := os.Remove(at(root, "d/f")); err != nil {
					return err
				}
				return os.Symlink("../e/f", at(root, "d/f"))
			}},
		{name: "dir replaced by a link", path: "d/f", wantErr: syscall.ELOOP,
			swap: func(root string) error {
				if err := os.Rename(at(root, "d"), at(root, "old")); err != nil {
					return err
				}
				return os.Symlink("e", at(root, "d"))
			}},
		{name: "removed", path: "d/f", wantErr: fs.ErrNotExist,
			swap: func(root string) error { return os.Remove(at(root, "d/f")) }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			root := tempRoot(t)
			build(t, root, "d/", "d/f", "e/", "e/f")
			p := at(root, tt.path)
			r, err := Resolve(p)
			if err != nil {
				t.Fatal(err)
			}
			if err := tt.swap(root); err != nil {
				t.Fatal(err)
			}
			f, err := r.Open()
			if tt.wantErr == nil {
				if err != nil {
					t.Fatal(err)
				}
				sameInode(t, f, p)
				f.Close()
				return
			}
			if err == nil {
				f.Close()
				t.Fatalf("Open after %q succeeded", tt.name)
			}
			if !errors.Is(err, tt.wantErr) {
				t.Errorf("Open = %v; want %v", err, tt.wantErr)
			}
		})
	}
}

func TestOpenRefusesForgedResolutions(t *testing.T) {
	if f, err := (Resolution{Path: "/etc", Exists: true}).Open(); !errors.Is(err, fs.ErrInvalid) {
		f.Close()
		t.Errorf("hand-made Resolution: Open = %v; want fs.ErrInvalid", err)
	}
	r, err := Resolve("/")
	if err != nil {
		t.Fatal(err)
	}
	r.Path = "/etc" // a real Resolution with its path changed
	if f, err := r.Open(); !errors.Is(err, ErrChanged) {
		f.Close()
		t.Errorf("retargeted Resolution: Open = %v; want ErrChanged", err)
	}
	if _, err := (Resolution{Path: "/nope"}).Open(); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("absent: Open = %v; want fs.ErrNotExist", err)
	}
}

// TestOpenPinsTheInodeForBwrap runs bwrap: a source checked and opened, then
// swapped for a link to another directory. Binding by path (the control)
// mounts the attacker's directory; binding the fd mounts the checked one.
func TestOpenPinsTheInodeForBwrap(t *testing.T) {
	bwrap := sandboxtest.Bwrap(t)
	root := tempRoot(t)
	build(t, root, "S/", "S/marker", "evil/", "evil/marker", "W/")
	if err := os.WriteFile(at(root, "S/marker"), []byte("checked"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(at(root, "evil/marker"), []byte("attacker"), 0o644); err != nil {
		t.Fatal(err)
	}
	g, err := New([]string{at(root, "W")})
	if err != nil {
		t.Fatal(err)
	}
	r, err := g.CheckRead(at(root, "S"))
	if err != nil {
		t.Fatal(err)
	}
	f, err := r.Open()
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	// The swap, after the check.
	if err := os.Rename(at(root, "S"), at(root, "S.old")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("evil", at(root, "S")); err != nil {
		t.Fatal(err)
	}
	run := func(bind ...string) string {
		t.Helper()
		args := append([]string{"--ro-bind", "/", "/", "--unshare-all", "--die-with-parent"}, bind...)
		cmd := exec.Command(bwrap, append(args, "--", "/bin/cat", "/mnt/marker")...)
		cmd.ExtraFiles = []*os.File{f} // fd 3
		cmd.Env = []string{}
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("bwrap %q: %v: %s", bind, err, out)
		}
		return string(out)
	}
	if got := run("--ro-bind", at(root, "S"), "/mnt"); got != "attacker" {
		t.Fatalf("control: binding the path after the swap read %q; want the attacker's file", got)
	}
	if got := run("--ro-bind-fd", "3", "/mnt"); got != "checked" {
		t.Errorf("binding the fd read %q; want the checked directory", got)
	}
}
