package bwrap

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"

	"github.com/sandbox-run/sandbox-run/internal/fault"
	"github.com/sandbox-run/sandbox-run/mount"
	"github.com/sandbox-run/sandbox-run/report"
)

// ownerLend is --map-owner's part of a run: the workdir's owner on the
// host, the sandbox's ids, and the descriptors bwrap binds the workdir and
// the directories in it by, which the launch replaces with idmapped
// clones of the same trees.
//
// The clones are attached in a mount namespace of the launching thread's
// own (unshare on a locked thread, propagation cut from the host's), on
// top of the directories themselves: bwrap inherits that namespace, binds
// them, and the namespace ends with bwrap. Nothing is mounted in the
// host's namespace, nothing is made in /run or in the user's tree, and a
// run killed at any point leaves nothing to sweep.
type ownerLend struct {
	dir          string
	owner, group int      // the workdir's, on the host
	uid, gid     int      // the sandbox's
	fds          []int    // bwrap's descriptor numbers of those binds
	paths        []string // and their directories, in the same order
}

// checkMapOwner refuses --map-owner where it cannot hold: it needs root
// (mounts) and a bwrap that binds by descriptor. It is a prepare step.
func (r *bwRun) checkMapOwner(context.Context) error {
	if !r.opts.MapOwner {
		return nil
	}
	if !r.root {
		return fault.New("--map-owner", "only root lends a directory's owner (it mounts); as uid "+strconv.Itoa(os.Geteuid())+
			" the sandbox already runs as you", "leave out --map-owner")
	}
	if !r.info.Features.BindFD {
		return fault.New("--map-owner", "this bwrap cannot bind by descriptor (--bind-fd)", "install bubblewrap 0.8.0 or newer, or leave out --map-owner")
	}
	return nil
}

// planLend reads the workdir's owner and picks the writable binds at or
// under it from mounts. It is a prepare step's body; it mounts nothing.
func planLend(dir string, mounts []mount.Step, uid, gid int) (*ownerLend, error) {
	var st unix.Stat_t
	if err := unix.Stat(dir, &st); err != nil {
		return nil, fault.New("--map-owner "+dir, err.Error(), "pass a workdir that exists")
	}
	l := &ownerLend{dir: dir, owner: int(st.Uid), group: int(st.Gid), uid: uid, gid: gid}
	for _, m := range mounts {
		if m.Kind == mount.Bind && m.FD >= 0 && (m.Dst == dir || strings.HasPrefix(m.Dst, dir+"/")) {
			l.fds = append(l.fds, m.FD)
			l.paths = append(l.paths, m.Dst)
		}
	}
	if len(l.fds) == 0 {
		return nil, fault.New("--map-owner "+dir, "the workdir is not bound by descriptor", "report this as a bug in sandbox-run")
	}
	return l, nil
}

// attach runs on the launching thread, locked, right before bwrap is
// forked: it moves the thread into a mount namespace of its own and
// replaces, in fds, each of l.fds with an idmapped clone of its tree
// attached over it. The returned descriptors are closed by the caller once
// bwrap has them; back, never nil, puts the thread into the mount
// namespace it came from, and is called once bwrap is forked. On error
// nothing of the host's is changed and the thread is back already.
//
// back matters because the thread is not certain to end with its
// goroutine: Go wedges the process's main thread instead of ending it,
// and /proc/self/ns/mnt and /proc/self/mountinfo are that thread's. Left
// in the lent namespace, it would show every later reader in sandbox-run
// that namespace for the process's own.
func (l *ownerLend) attach(fds []uintptr) (trees []int, back func() error, err error) {
	back = func() error { return nil }
	fail := func(what string, err error) ([]int, func() error, error) {
		for _, t := range trees {
			unix.Close(t)
		}
		if berr := back(); berr != nil {
			err = fmt.Errorf("%w; and the launching thread cannot go back to its mount namespace: %v", err, berr)
		}
		return nil, back, fault.New(fmt.Sprintf("--map-owner %s: cannot %s", l.dir, what), err.Error(),
			"leave out --map-owner and chown -R "+strconv.Itoa(l.uid)+":"+strconv.Itoa(l.gid)+" "+l.dir)
	}
	// The clones are taken while the trees are in this thread's
	// namespace (open_tree clones only its own namespace's mounts).
	for _, n := range l.fds {
		t, err := unix.OpenTree(int(fds[n]), "", unix.OPEN_TREE_CLONE|unix.OPEN_TREE_CLOEXEC|unix.AT_EMPTY_PATH|unix.AT_RECURSIVE)
		if err != nil {
			return fail("clone it", fmt.Errorf("open_tree: %w", err))
		}
		trees = append(trees, t)
	}
	home, err := unix.Open("/proc/thread-self/ns/mnt", unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return fail("hold its mount namespace", err)
	}
	if err := unix.Unshare(unix.CLONE_NEWNS); err != nil {
		unix.Close(home)
		return fail("make a mount namespace", err)
	}
	back = func() error {
		if home < 0 {
			return nil
		}
		// unshare gave the thread a file system context of its own, so
		// setns may move it; the namespace's root becomes its root and
		// directory, as the process's are.
		err := unix.Setns(home, unix.CLONE_NEWNS)
		unix.Close(home)
		home = -1
		return err
	}
	// Nothing mounted here may reach the host's namespace.
	if err := unix.Mount("", "/", "", unix.MS_REC|unix.MS_SLAVE, ""); err != nil {
		return fail("cut mount propagation", err)
	}
	ns, err := l.userns()
	if err != nil {
		return fail("make the id mapping", err)
	}
	defer unix.Close(ns)
	for i, n := range l.fds {
		if err := idmapOver(trees[i], ns, int(fds[n]), l.paths[i]); err != nil {
			return fail("mount it idmapped", err)
		}
		fds[n] = uintptr(trees[i])
	}
	return trees, back, nil
}

// idmapOver maps the detached tree t through the user namespace ns,
// nosuid and nodev, and attaches it over path, which must still be the
// directory held by fd (checked by device and inode, path opened without
// following any link): t, now attached, is what bwrap binds.
func idmapOver(t, ns, fd int, path string) error {
	attr := &unix.MountAttr{Attr_set: unix.MOUNT_ATTR_IDMAP | unix.MOUNT_ATTR_NOSUID | unix.MOUNT_ATTR_NODEV, Userns_fd: uint64(ns)}
	if err := unix.MountSetattr(t, "", unix.AT_EMPTY_PATH|unix.AT_RECURSIVE, attr); err != nil {
		return fmt.Errorf("mount_setattr: %w", err)
	}
	at, err := unix.Openat2(unix.AT_FDCWD, path, &unix.OpenHow{Flags: unix.O_PATH | unix.O_DIRECTORY | unix.O_CLOEXEC,
		Resolve: unix.RESOLVE_NO_SYMLINKS | unix.RESOLVE_NO_MAGICLINKS})
	if err != nil {
		return fmt.Errorf("reopen %s: %w", path, err)
	}
	defer unix.Close(at)
	var want, got unix.Stat_t
	if err := unix.Fstat(fd, &want); err != nil {
		return err
	}
	if err := unix.Fstat(at, &got); err != nil {
		return err
	}
	if want.Dev != got.Dev || want.Ino != got.Ino {
		return fmt.Errorf("%s changed since it was checked", path)
	}
	if err := unix.MoveMount(t, "", at, "", unix.MOVE_MOUNT_F_EMPTY_PATH|unix.MOVE_MOUNT_T_EMPTY_PATH); err != nil {
		return fmt.Errorf("move_mount: %w", err)
	}
	return nil
}

// userns returns a descriptor of a new user namespace whose only mapping
// is the owner's ids (inside) to the sandbox's (outside): through it the
// owner's files show as the sandbox uid's, and the sandbox uid's writes
// are stored as the owner's. Every other id is unmapped, so its files
// are only "other" to the command. The namespace is held by a child
// stopped at its exec (ptrace) until the descriptor is open, then killed.
func (l *ownerLend) userns() (int, error) {
	exe, err := os.Executable()
	if err != nil {
		return -1, err
	}
	pid, err := syscall.ForkExec(exe, []string{exe}, &syscall.ProcAttr{Env: []string{}, Sys: &syscall.SysProcAttr{
		Cloneflags:  syscall.CLONE_NEWUSER,
		UidMappings: []syscall.SysProcIDMap{{ContainerID: l.owner, HostID: l.uid, Size: 1}},
		GidMappings: []syscall.SysProcIDMap{{ContainerID: l.group, HostID: l.gid, Size: 1}},
		Ptrace:      true, // stops at the exec: the program never runs
		Pdeathsig:   syscall.SIGKILL,
	}})
	if err != nil {
		return -1, err
	}
	defer func() {
		_ = syscall.Kill(pid, syscall.SIGKILL)
		var ws syscall.WaitStatus
		for {
			if _, err := syscall.Wait4(pid, &ws, 0, nil); err != syscall.EINTR {
				break
			}
		}
	}()
	return unix.Open("/proc/"+strconv.Itoa(pid)+"/ns/user", unix.O_RDONLY|unix.O_CLOEXEC, 0)
}

// LendsOwner says bwrap honours --map-owner (mechanism.OwnerLender).
func (r *bwRun) LendsOwner() {}

// lendOwner plans --map-owner's binds once the mount plan exists. It is a
// prepare step.
func (r *bwRun) lendOwner(context.Context) (err error) {
	if r.opts.MapOwner {
		r.lend, err = planLend(r.p.Workdir, r.pl.Mounts, r.uid, r.gid)
	}
	return err
}

// lendReport says in rep's notes that the workdir's owner was lent (the
// run is planned to attach it; a failed attach ends the run with 125).
func (r *bwRun) lendReport(rep *report.Report) {
	if r.lend == nil {
		return
	}
	rep.Notes = append(rep.Notes, fmt.Sprintf("--map-owner: %s (owner %d:%d) is mounted idmapped for the sandbox's %d:%d: the command runs as %d, what it writes there is stored as %d:%d, and set-user-ID and set-group-ID bits are refused",
		r.lend.dir, r.lend.owner, r.lend.group, r.lend.uid, r.lend.gid, r.lend.uid, r.lend.owner, r.lend.group))
}
