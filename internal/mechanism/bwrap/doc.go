// Package bwrap is tier 1 on Linux: the plan (internal/plan) translated
// into bubblewrap's arguments (package bwrap at the module's top, imported
// here as bw), with the sandbox's own user, mount, PID, IPC, UTS and
// network namespaces, the seccomp deny-list, no capabilities, binds by
// descriptor where bwrap has --bind-fd, and the limits held by a cgroup of
// the run's own, rlimits or the sampler. Its PID 1 is bwrap's (a POSIX sh
// trampoline reports and execs the command) or, when something is
// forwarded, a terminal is given or an rlimit needs applying,
// sandbox-run's own init. The network side is internal/hostnet's; what is
// handed in (an SSH agent, named sockets, host and published ports) is
// bound here.
//
// It imports the contract (internal/mechanism), the plan and the network
// side; never package sandbox and never another mechanism.
package bwrap
