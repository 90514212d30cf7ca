// Package tun makes the TUN device of a sandbox's network namespace from
// outside the sandbox, the way slirp4netns and pasta attach to a running
// namespace: a locked OS thread of the caller enters the namespace,
// creates and configures the device, and the descriptor stays with the
// caller. The sandboxed command never holds a capability for it.
//
// Entering needs CAP_SYS_ADMIN over the namespace and in the caller's own
// user namespace (the host's root has both); an unprivileged caller gets
// ErrPermission, since entering the sandbox's user namespace first is
// allowed only to a single-threaded process, which a Go program is not.
// Linux only.
package tun
