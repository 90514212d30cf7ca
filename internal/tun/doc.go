// Package tun makes the TUN device of a sandbox's network namespace, so
// that the launcher, outside the sandbox, holds its descriptor and serves
// its packets; the sandboxed command never holds a capability for it.
//
// Two ways, both Linux only:
//
//   - HelperMain, the one sandbox-run uses: the launcher starts a helper
//     in a new user and network namespace of its own (HelperAttr), which
//     makes the device there, sends its descriptor back (Receive), drops
//     every capability and becomes bwrap; bwrap keeps that network
//     namespace and nests its own user namespace inside. It needs neither
//     root nor CAP_SYS_PTRACE: only unprivileged user namespaces and
//     read-write access to /dev/net/tun for the caller.
//   - Open, the way slirp4netns and pasta attach to a running namespace:
//     a locked OS thread of the caller enters the namespace, creates and
//     configures the device, and the descriptor stays with the caller.
//     Entering needs CAP_SYS_ADMIN over the namespace and in the caller's
//     own user namespace (the host's root has both, and CAP_SYS_PTRACE to
//     open another uid's namespace); an unprivileged caller gets
//     ErrPermission, since entering the sandbox's user namespace first is
//     allowed only to a single-threaded process, which a Go program is
//     not.
package tun
