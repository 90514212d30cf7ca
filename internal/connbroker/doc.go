// Package connbroker gives a sandboxed command's TCP connections to
// allowed addresses the kernel's own data path: the command's connect(2)
// stops at a seccomp user notification, sandbox-run judges the exact
// address and dials it from the host, and the connected socket takes the
// place of the command's own descriptor. No byte of such a connection
// passes through sandbox-run.
//
// The command installs the filter itself, in the exec shim, just before
// it becomes the command (Install), and hands the listener to the
// launcher, which serves it (Receive, Serve) for the run's life.
//
// # What it guarantees
//
// Serve never lets the kernel continue a connect(2). Once a socket of the
// host's network namespace is in the sandbox, a continued call could be
// pointed at it by another thread after the check (a swapped descriptor
// or address), and AF_UNSPEC would disconnect it. So Serve performs every
// connect itself, on its own copy of the descriptor (pidfd_getfd) with
// its own copy of the address, read once:
//
//   - a socket of any network namespace but the sandbox's is refused
//     (EPERM): a brokered socket, or one the caller passed in, can
//     never be disconnected or pointed elsewhere;
//   - a TCP socket of the sandbox's namespace, not bound, to an address
//     outside the sandbox's own ranges, is brokered when Config.Dial
//     allows and connects it; refused as Dial's error says otherwise;
//   - a Unix socket path is resolved in the command's root
//     (RESOLVE_IN_ROOT) with the command's file-system ids, so that no
//     symlink and none of sandbox-run's privileges reach a host socket;
//   - anything else is connected as asked, in the socket's own (the
//     sandbox's) network namespace, where the netstack judges it as
//     before.
//
// A brokered socket is bound to an explicit port before it connects, so
// that when its connection ends the command cannot bind it to a host
// port of its choice (an explicit port stays with the socket).
//
// # What it does not hide
//
// A brokered socket is the host's: getsockname shows the host's source
// address, and the SIOCGIF* ioctls on it list the host's interfaces (read
// only; changing them needs CAP_NET_ADMIN in the host's namespace). The
// command's own setsockopt calls before connect are carried over only
// for O_NONBLOCK, TCP_NODELAY and SO_KEEPALIVE.
package connbroker
