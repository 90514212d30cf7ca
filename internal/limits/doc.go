// Package limits holds a sandbox's resource limits: it decides how each
// limit is enforced on this machine (NewPlan), applies rlimits (Apply, in
// sandbox-run's init; NewExec and Run, in the exec shims that become the
// command), makes and removes one cgroup v2 per sandbox (Create,
// Close), watches a cgroup (Watch) or, without one, samples the process tree
// (Sample), and classifies how a sandbox ended (Classify).
//
// It holds mechanisms only. The launcher decides when to call them: find a
// base (FindDelegated), build a Plan from Limits and what the base offers
// (Enabled), Create the cgroup with Plan.Cgroup and start bwrap in it
// (syscall.SysProcAttr{UseCgroupFD: true, CgroupFD: cg.FD()}), hand
// Plan.Rlimits to init (initproc.Config.Rlimits, whose wire format is
// init's own), which Applies them before it starts the command, run Watch
// or Sample (with Plan.Sample), end the whole sandbox on the first
// Exceeded, then Classify and Close.
//
// # Guarantees
//
//   - Every limit the Plan says is enforced by "cgroup" is the kernel's:
//     memory.max with memory.swap.max 0 (swap cannot hold the excess) and
//     memory.oom.group 1 (the OOM killer ends the whole sandbox); pids.max
//     over every task, threads included. Memory and tasks are summed over
//     the sandbox, not per process.
//   - "rlimit" is the kernel's too, with the rlimit's own scope: NOFILE,
//     FSIZE, CPU, DATA and CORE per process; NPROC per user namespace and
//     uid (Linux 5.14+), which for a sandbox with its own user namespace
//     means its own tasks (TestNProcPerUserNamespace).
//   - RLIMIT_CORE is 0 in every Plan: no core dumps.
//   - Apply only tightens: it never raises a hard limit, and a value above
//     it is lowered to it. So does an Exec's Run.
//   - An Exec's Run sets the limits with nothing that allocates between the
//     first of them and the execve (TestExecRunAllocatesNothing), so a Go
//     shim, whose runtime alone maps more than most RLIMIT_DATA values
//     (TestExecUnderDataBelowTheRuntime), is never held to the command's
//     limits while it still runs Go code that could need memory or a thread.
//   - Create refuses (ErrController) a memory or pids limit whose controller
//     the base does not enable, and creates nothing; it never reuses an
//     existing cgroup. Close kills every process in the cgroup, at once
//     with cgroup.kill (setsid and double-forked ones included), waits for
//     it to empty (at most DrainTimeout) and removes it; it reports when it
//     could not.
//   - A Plan never names a method stronger than the one it sets up, and
//     Classify never turns a command's own exit status into a limit.
//
// # Non-guarantees
//
//   - "sampled" is not exact. Memory is read every IdleInterval (50 ms)
//     under a 64th of the limit, every SlowInterval (10 ms) from there,
//     every FastInterval (1 ms) from half the limit on (of whichever of
//     memory, tasks and CPU time is nearest its limit); a process can overshoot
//     between two samples and while the launcher kills (TestSample* pin
//     "caught before twice the limit" for a hog). RLIMIT_DATA at
//     DataBackstop (1.25 × the limit + 32 MiB) bounds one process that maps
//     memory faster than that; it counts private writable mappings, so thread
//     stacks and reserved-but-untouched heaps count against it too.
//   - What sampling counts: resident anonymous and shmem memory (RssAnon +
//     RssShmem, O(1) counters of /proc/PID/status); above the limit it is
//     confirmed with the proportional set size (Pss_Anon + Pss_Shmem of
//     smaps_rollup), which charges a page shared by n processes (a forked
//     server's copy-on-write heap, a shared memory segment) 1/n to each
//     rather than n times. PSS is only read to confirm because reading it
//     walks the page tables under the process's mmap lock: too slow for
//     every millisecond, and a hostile process could make it slower. RSS is
//     never below PSS, so the cheap check misses nothing the exact one would
//     see. Added to it: shared memory no process needs to map (Usage.Held):
//     every memfd and /dev/shm object a process holds a descriptor of, and
//     the used space of the tmpfs paths given to Sample. File-backed pages
//     (program text, mapped files) are not counted; neither are an object
//     that is only mapped (only its resident pages count), one in flight
//     on a socket, nor System V segments no process maps.
//   - The sampler follows /proc/PID/task/TID/children from the root. Inside
//     a PID namespace orphans are reparented to its init, the root, so
//     nothing escapes the walk; without one (tier 0), a double-forked
//     orphan goes to the host's init or a subreaper and is no longer seen.
//   - Sampled CPU time is user + system time of the live processes plus
//     what they reaped (cutime, cstime). A child reaped without wait (SIGCHLD
//     ignored) takes its time with it. RLIMIT_CPU still holds per process.
//   - RLIMIT_NPROC counts per user id in a user namespace. Without a user
//     namespace of its own (tier 0) it would count every process of the
//     user on the host, and host root is exempt: then pids are sampled.
//   - Rlimits apply to init too: its descriptors count against NOFILE, its
//     threads against NPROC and pids.max, its CPU against CPU. A Go init
//     that cannot create a thread at the pids limit aborts, which ends the
//     sandbox; Env.OverheadTasks leaves room for it.
//   - Watch and Sample report; they do not kill. The launcher ends the
//     sandbox on Exceeded; until it does, the sandbox runs on.
//   - cgroup.kill needs Linux 5.14; before it Kill signals the members of
//     cgroup.procs in a loop, which a fork bomb can outrun until
//     DrainTimeout.
//
// # Cgroup delegation and the no-internal-process rule
//
// A cgroup other than the root cannot both hold processes and enable
// controllers for its children. FindDelegated never moves a process to get
// around it; see its documentation for what it accepts and how an
// operator prepares a base. A cgroup without the memory and pids
// controllers is still useful: Kill and Close end every descendant, and
// CPUTime reads cpu.stat, which every cgroup v2 has.
//
// # Platform differences
//
// Cgroups and the sampler are Linux only; elsewhere they return errors
// wrapping errors.ErrUnsupported. Apply works on Linux and macOS (where
// RLIMIT_NPROC is per user, system-wide); NewPlan, the encoding and
// Classify are portable.
package limits
