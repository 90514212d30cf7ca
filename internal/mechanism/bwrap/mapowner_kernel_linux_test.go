package bwrap

import (
	"os"
	"runtime"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/sandbox-run/sandbox-run/internal/sandboxtest"
)

// TestLendAttachGoesBack: --map-owner's attach moves the launching thread
// into a mount namespace of its own, where the workdir shows as the
// sandbox uid's, and back returns the thread to the namespace it came
// from, where the workdir is the owner's again. Control: between the two
// the thread's namespace really is another one and the idmapped mount
// shows there, so a back that did nothing would fail.
func TestLendAttachGoesBack(t *testing.T) {
	sandboxtest.Root(t)
	dir := t.TempDir()
	const owner, sandboxUID = 4321, 65534
	if err := os.Chown(dir, owner, owner); err != nil {
		t.Fatal(err)
	}
	fd, err := unix.Open(dir, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(fd)
	l := &ownerLend{dir: dir, owner: owner, group: owner, uid: sandboxUID, gid: sandboxUID, fds: []int{0}, paths: []string{dir}}

	type seen struct {
		before, during, after string
		uidDuring, uidAfter   uint32
		attachErr, backErr    error
	}
	ch := make(chan seen, 1)
	go func() {
		runtime.LockOSThread() // never unlocked: the thread ends here
		var s seen
		nsOf := func() string { n, _ := os.Readlink("/proc/thread-self/ns/mnt"); return n }
		uidOf := func() uint32 {
			var st unix.Stat_t
			unix.Stat(dir, &st)
			return st.Uid
		}
		s.before = nsOf()
		trees, back, err := l.attach([]uintptr{uintptr(fd)})
		if s.attachErr = err; err != nil {
			ch <- s
			return
		}
		s.during, s.uidDuring = nsOf(), uidOf()
		for _, tr := range trees {
			unix.Close(tr)
		}
		s.backErr = back()
		s.after, s.uidAfter = nsOf(), uidOf()
		ch <- s
	}()
	s := <-ch
	if s.attachErr != nil {
		t.Fatalf("attach: %v", s.attachErr)
	}
	if s.during == s.before || s.uidDuring != sandboxUID {
		t.Fatalf("control: after attach the thread is in %s (was %s) and sees %s as uid %d, want another namespace and uid %d",
			s.during, s.before, dir, s.uidDuring, sandboxUID)
	}
	if s.backErr != nil || s.after != s.before || s.uidAfter != owner {
		t.Fatalf("after back (error %v) the thread is in %s, want %s, and sees %s as uid %d, want %d", s.backErr, s.after, s.before, dir, s.uidAfter, owner)
	}
}
