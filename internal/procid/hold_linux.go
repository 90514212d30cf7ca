package procid

import (
	"errors"
	"syscall"
)

// A name tells a run's process only to a judge of its namespace (Judge).
// A lock tells it to anyone who can open the file: the kernel drops a
// flock when the last descriptor of its open file goes, as when the
// process that holds it ends, whatever namespace it ran in. So a run that
// holds (HoldAt) a shared lock on a file or directory it names for itself,
// from before any other process can judge the name until its end, can be
// judged from any namespace (ProbeAt): the lock taken exclusively means no
// holder is left.
//
// Only what the holder marks as held may be probed (a journal's Locked, a
// run directory's name): an object never held, or not yet, takes the lock
// as freely as one whose holder ended.

// lockOpen is how both sides open the locked object: never through a
// link (a name planted in a shared directory is not followed), and never
// waiting (a FIFO put in its place would block a plain open for a
// writer); a descriptor of the holder's is not inherited by what it
// starts, which would hold the lock past the run.
const lockOpen = syscall.O_RDONLY | syscall.O_NOFOLLOW | syscall.O_NONBLOCK | syscall.O_CLOEXEC

// HoldAt takes the shared flock that marks this process live on name (a
// file or a directory) in the directory dirfd, and returns its release,
// which closes the descriptor; the kernel releases it when the process
// ends, however. ok is false when the lock could not be taken (name
// missing or a link, or a file system without flock): the caller must
// then not mark name held, or a probe would find it free and judge the
// process ended.
func HoldAt(dirfd int, name string) (release func(), ok bool) {
	fd, err := syscall.Openat(dirfd, name, lockOpen, 0)
	if err != nil {
		return func() {}, false
	}
	if syscall.Flock(fd, syscall.LOCK_SH|syscall.LOCK_NB) != nil {
		syscall.Close(fd)
		return func() {}, false
	}
	return func() { syscall.Close(fd) }, true
}

// ProbeAt judges the process that holds name in the directory dirfd
// (HoldAt): Ended when the lock can be taken exclusively (no holder is
// left), Alive when it cannot, Unknown when name cannot be opened (gone,
// a link) or the file system refuses the lock. A lock taken is released
// before ProbeAt returns.
func ProbeAt(dirfd int, name string) State {
	fd, err := syscall.Openat(dirfd, name, lockOpen, 0)
	if err != nil {
		return Unknown
	}
	defer syscall.Close(fd) // releases a lock taken
	switch err := syscall.Flock(fd, syscall.LOCK_EX|syscall.LOCK_NB); {
	case err == nil:
		return Ended
	case errors.Is(err, syscall.EWOULDBLOCK):
		return Alive
	}
	return Unknown
}
