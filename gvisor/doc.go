// Package gvisor translates a sandbox's mount plan and process into the
// OCI runtime spec and the runsc command line of a tier-2 run: the
// command's system calls are served by gVisor's own kernel (the Sentry),
// not the host's.
//
// It is pure: no file is read or written and nothing is started. The
// caller (package sandbox) vets every path, writes the bundle into a
// private directory, starts runsc and cleans up.
//
// # Guarantees
//
//   - The root file system is an empty directory of the bundle, read-only;
//     nothing of the host is visible but what the plan binds: the system
//     paths and --read paths read-only, the writable directories
//     read-write at the same paths, the protected paths read-only on top.
//   - A bind of the host's /proc (the plan's read-only and hidden /proc
//     entries for bwrap) is never rendered: gVisor's /proc is its own, and
//     binding the host's would hand the host's view in.
//   - A bind of /dev/null (the plan's cover for a socket or FIFO under a
//     --read path) becomes a bind of an empty read-only file of the
//     bundle: gVisor does not bind host devices.
//   - The spec holds no capability, sets no_new_privileges, and names no
//     network but the Sentry's own loopback (runsc --network=none).
//   - Host Unix sockets are reachable (runsc --host-uds=open) only when the
//     run forwards one; a socket under a --read path is covered by the
//     plan whatever the flag says.
//
// # Non-guarantees
//
//   - Binds go by path: runsc's gofer opens each source when the sandbox
//     starts, so a path swapped between sandbox-run's check and that open
//     is what gets mounted (bwrap's --bind-fd closes this window; runsc has
//     no equivalent).
//   - Memory and task ceilings need a cgroup that runsc manages; they are
//     not rendered here (the caller refuses them).
package gvisor
