// Package gvisor is tier 2: the same plan as bwrap's, translated into an
// OCI bundle (package gvisor at the module's top, imported here as oci)
// that runsc runs, so the command's system calls are served by gVisor's
// kernel rather than the host's. The network side is the same
// (internal/hostnet), with transparent egress through a TUN device that
// runsc's sandbox holds. It refuses what runsc cannot hold (--memory is
// sampled on runsc's process tree; --pids and --cpu-time are refused) and
// binds by path: runsc has no bind by descriptor.
//
// It imports the contract (internal/mechanism), the plan and the network
// side; never package sandbox and never another mechanism.
package gvisor
