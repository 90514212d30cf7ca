package bwrap

import (
	"context"
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
// back. It runs while the sandbox's first process (init, or the fast
// path's trampoline) waits at its gate: bwrap has written the
// namespace's maps by then (before, the helper's uid may not be mapped
// and bwrap fails with EOVERFLOW), and the command has not started. Then
// it counts the instances the sandbox already holds, which should be
// none: more than the ceiling held then would be kept, and that fails
// too. A sandbox that has already ended (its PID 1 gone) holds nothing,
// and that is no failure.
func (r *bwRun) setInotify(ctx context.Context, pid int) error {
	if r.inotify == (limits.Inotify{}) {
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
	args := []string{"--userns", "3", "--bind", "/", "/", "--cap-add", "CAP_SYS_RESOURCE", "--die-with-parent"}
	if r.root && r.netMade {
		// The sandbox's namespace is nested in the network namespace
		// helper's, which root made and owns: only root may join it,
		// and then becomes the sandbox's uid there (root's uid 0 is
		// not mapped).
		args = append(args, "--uid", strconv.Itoa(r.uid), "--gid", strconv.Itoa(r.gid))
	}
	c := exec.CommandContext(ctx, r.path, append(args, "--", "/bin/sh", "-c", r.inotify.Script())...)
	c.Env = []string{}
	c.ExtraFiles = []*os.File{ns}
	if r.root && !r.netMade {
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
