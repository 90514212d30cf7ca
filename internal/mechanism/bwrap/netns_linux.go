package bwrap

import (
	"errors"
	"fmt"
	"net"
	"os"
	"time"

	"golang.org/x/sys/unix"

	"github.com/sandbox-run/sandbox-run/internal/fault"
	"github.com/sandbox-run/sandbox-run/internal/hostnet"
	"github.com/sandbox-run/sandbox-run/internal/tun"
)

// helperWait bounds how long start waits for the network namespace
// helper's word (a Go program's start and a few system calls; generous
// for a loaded machine). A helper that says nothing by then is ended and
// transparent egress is lost, not the run.
const helperWait = 30 * time.Second

// startTransparent starts bwrap for a run with transparent egress: first
// the network namespace helper (internal/tun.HelperMain, in the init
// binary at fdInit) in a new user and network namespace, which makes the
// TUN device, sends it here, drops every capability and becomes bwrap
// with r.argsNet (no --unshare-net: bwrap keeps that namespace, which
// holds only lo and the device, and nests its own user namespace in
// ours). The netstack is served and init's gate opened before start
// returns.
//
// made is false when the helper could not do it (user namespaces
// refused, no usable /dev/net/tun, a helper that failed): nothing of it
// runs any more, the loss is recorded (loseTransparent), and bwrap was
// started the plain way, with its own empty network namespace
// (--unshare-net, r.args). Isolation is never less than bwrap's own.
func (r *bwRun) startTransparent(files []*os.File, bp *bwProc) (pid int, made bool, err error) {
	ours, theirs, err := seqpacketPair()
	if err != nil {
		return 0, false, err
	}
	defer ours.Close()
	h := tun.Helper{Sock: len(files), UID: r.uid, GID: r.gid, SetGroups: r.root,
		Device:  tun.Config{Name: hostnet.TunName, Addr: hostnet.TunAddr, MTU: hostnet.TunMTU, Route: true, VnetHdr: true},
		Inotify: tun.Inotify{Instances: r.inotify.Instances, Watches: r.inotify.Watches}, Argv: r.argv}
	argv := append([]string{fmt.Sprintf("/proc/self/fd/%d", fdInit)}, h.Args()...)
	pidfd := -1
	pid, err = r.fork(launch{argv: argv, helper: true, pidfd: &pidfd}, append(files[:len(files):len(files)], theirs), bp.exited)
	theirs.Close()
	if err != nil {
		return r.startPlain(files, bp, "the sandbox's own user and network namespaces could not be made: "+err.Error())
	}
	defer unix.Close(pidfd)
	dev, inotifyLost, err := tun.Receive(ours, time.Now().Add(helperWait))
	if err != nil {
		if !errors.As(err, new(*tun.LostError)) {
			unix.PidfdSendSignal(pidfd, unix.SIGKILL, nil, 0)
		}
		<-bp.exited // the helper, which never became bwrap
		bp.exited = make(chan bwExit, 1)
		return r.startPlain(files, bp, err.Error())
	}
	if err := r.nw.AttachTransparent(dev, r.log); err != nil {
		unix.PidfdSendSignal(pidfd, unix.SIGKILL, nil, 0)
		<-bp.exited
		return 0, false, err
	}
	r.helperInotify = inotifyLost
	return pid, true, nil
}

// startPlain names transparent egress lost (why) and starts bwrap the
// plain way.
func (r *bwRun) startPlain(files []*os.File, bp *bwProc, why string) (int, bool, error) {
	if err := r.nw.LoseTransparent(why, r.log); err != nil {
		return 0, false, err
	}
	pid, err := r.fork(launch{argv: r.argv}, files, bp.exited)
	return pid, false, err
}

// seqpacketPair is a connected pair of Unix sockets: ours (a net
// connection, for deadlines) and theirs, for the helper.
func seqpacketPair() (*net.UnixConn, *os.File, error) {
	fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_SEQPACKET|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return nil, nil, fault.New("cannot create a socket pair", err.Error(), "raise the descriptor limit")
	}
	f := os.NewFile(uintptr(fds[0]), "netns-helper")
	c, err := net.FileConn(f)
	f.Close()
	if err != nil {
		unix.Close(fds[1])
		return nil, nil, fault.New("cannot use a socket pair", err.Error(), "report this as a bug in sandbox-run")
	}
	return c.(*net.UnixConn), os.NewFile(uintptr(fds[1]), "netns-helper"), nil
}
