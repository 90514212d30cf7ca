package bwrap

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/sandbox-run/sandbox-run/internal/limits"
)

// inotifyTimeout bounds the helper that sets the inotify ceiling.
const inotifyTimeout = 10 * time.Second

// setInotify sets the run's inotify ceiling (r.inotify; zero: none) in
// the user namespace of pid, the sandbox's PID 1, as the host sees it.
// Only a process with CAP_SYS_RESOURCE in that namespace may write its
// user.max_inotify_* sysctls, and setns into a user namespace needs a
// single-threaded process, which a Go program is not: so a second bwrap,
// the caller's (the namespace's owner, or root), joins it (--userns) with
// that one capability and runs the sysctl script, which reads both values
// back. It starts as soon as bwrap reports pid, beside bwrap's set-up of
// the sandbox, and the command's gate opens only after it: it first waits
// (bounded) for the namespace's uid map, which bwrap's child writes just
// after its clone (before it, the helper's uid is not mapped and bwrap
// fails with EOVERFLOW). With --disable-userns bwrap's child then moves
// into a second namespace nested in the first; either one may be the one
// opened here, and a ceiling on the first holds for the second (the
// kernel checks every namespace on the way up). Then it counts the
// instances the sandbox already holds, which should be none: more than
// the ceiling held then would be kept, and that fails too. A sandbox
// that has already ended (its PID 1 gone) holds nothing, and that is no
// failure. With transparent egress none of this runs: the
// network namespace helper, whose user namespace is the sandbox's parent,
// set the ceiling there before bwrap started (the kernel checks it for
// every namespace below), and only its answer is reported.
func (r *bwRun) setInotify(ctx context.Context, pid int) error {
	if r.inotify == (limits.Inotify{}) {
		return nil
	}
	if r.netMade {
		// The network namespace helper set it in its own user
		// namespace, which the sandbox's is nested in, before it
		// became bwrap (tun.Helper.Inotify): no second bwrap.
		if r.helperInotify != "" {
			return errors.New("inotify ceiling: " + r.helperInotify)
		}
		return nil
	}
	ns, err := os.Open("/proc/" + strconv.Itoa(pid) + "/ns/user")
	if err != nil {
		if gone(pid) {
			return nil
		}
		return fmt.Errorf("inotify ceiling: %w", err)
	}
	defer ns.Close()
	ctx, cancel := context.WithTimeout(ctx, inotifyTimeout)
	defer cancel()
	if err := uidMapped(ctx, pid); err != nil {
		if gone(pid) {
			return nil
		}
		return fmt.Errorf("inotify ceiling: %w", err)
	}
	args := []string{"--userns", "3", "--bind", "/", "/", "--cap-add", "CAP_SYS_RESOURCE", "--die-with-parent"}
	c := exec.CommandContext(ctx, r.path, append(args, "--", "/bin/sh", "-c", r.inotify.Script())...)
	c.Env = []string{}
	c.ExtraFiles = []*os.File{ns}
	if r.root {
		// As bwrap itself runs: as the namespace's owner, in which
		// root's uid 0 is not mapped.
		c.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uint32(r.uid), Gid: uint32(r.gid), Groups: []uint32{}}}
	}
	out, err := c.Output()
	if err != nil && gone(pid) {
		return nil
	}
	if err != nil {
		msg := err.Error()
		if ee, ok := err.(*exec.ExitError); ok && len(ee.Stderr) > 0 {
			msg += ": " + strings.TrimSpace(string(ee.Stderr))
		}
		return fmt.Errorf("inotify ceiling: %s", msg)
	}
	if err := r.inotify.CheckReadBack(string(out)); err != nil {
		return err
	}
	if n := limits.InotifyHeld(limits.Tree(pid)); int64(n) > r.inotify.Instances {
		return fmt.Errorf("inotify ceiling: the sandbox held %d instances before it was set, above the ceiling of %d", n, r.inotify.Instances)
	}
	return nil
}

// gone says the process pid has ended (or was never there).
func gone(pid int) bool {
	return syscall.Kill(pid, 0) == syscall.ESRCH
}

// uidMapped waits until the user namespace pid is in has a uid map
// (polled: nothing announces it), or ctx ends. The namespace was opened
// first: if pid has since moved into a nested one, the first's map was
// written before that one was made.
func uidMapped(ctx context.Context, pid int) error {
	path := "/proc/" + strconv.Itoa(pid) + "/uid_map"
	for wait := 50 * time.Microsecond; ; wait = min(2*wait, 5*time.Millisecond) {
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		if len(bytes.TrimSpace(b)) > 0 {
			return nil
		}
		select {
		case <-ctx.Done():
			return errors.New("the sandbox's user namespace got no uid map")
		case <-time.After(wait):
		}
	}
}
