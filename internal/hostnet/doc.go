// Package hostnet is the host side of a run's network, written once for
// every Linux mechanism: the run's runtime directory and the Unix sockets
// in it, the built-in egress proxy or the relays to the node's, the LLM
// channel, the forwards that the sandbox's init makes to them, the
// secrets the proxy injects and the run's own CA, and transparent egress
// (the netstack behind the sandbox's TUN device). A mechanism with a
// network namespace (bwrap, gVisor) calls SetupNetwork with the uid its
// sandbox runs as and binds what the Network lists; one without (Landlock,
// Seatbelt) calls StartLoopback, which serves the same proxy and relays on
// host loopback ports. Close stops what serves either.
//
// It guarantees that every socket it makes is reachable by the sandbox's
// uid only, that a TMPDIR inside a writable directory of the run is
// refused (CheckTmpdir), and that the runtime directories of killed runs
// are swept (StartSweep), those of runs in other pid namespaces too, by
// the lock each run holds on its own (MakeRunDir); a directory whose run
// cannot be judged stays. It does not decide what a connection may reach:
// package proxy and the netstack do, by the exact address.
//
// It imports neither package sandbox nor a mechanism.
package hostnet
