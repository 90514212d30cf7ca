package sandboxtest

import (
	"os"
	"path/filepath"
	"testing"

	"golang.org/x/sys/unix"
)

// SpecialTree makes a tree with a socket and a FIFO at depth 1 and 3, a
// regular file, and a link to a socket elsewhere (in outside, which a
// search that follows no link never reaches): root/agent.sock,
// root/a/pipe, root/a/file, root/a/b/docker.sock, root/link.sock.
// Both directories are t's temporary ones.
func SpecialTree(t testing.TB) (root, outside string) {
	t.Helper()
	root, outside = t.TempDir(), t.TempDir()
	os.MkdirAll(filepath.Join(root, "a", "b"), 0o755)
	SocketInode(t, filepath.Join(root, "agent.sock"))
	SocketInode(t, filepath.Join(root, "a", "b", "docker.sock"))
	if err := unix.Mkfifo(filepath.Join(root, "a", "pipe"), 0o666); err != nil {
		t.Fatal(err)
	}
	os.WriteFile(filepath.Join(root, "a", "file"), []byte("x"), 0o644)
	SocketInode(t, filepath.Join(outside, "far.sock"))
	os.Symlink(filepath.Join(outside, "far.sock"), filepath.Join(root, "link.sock"))
	return root, outside
}
