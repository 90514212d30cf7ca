package filter

import "slices"

// Cond says when a Rule applies to a call of its syscall.
type Cond int

const (
	// Always: every call of the syscall, whatever its arguments.
	Always Cond = iota + 1
	// AnyBitSet: the low 32 bits of argument Arg have at least one of the
	// bits of Values set.
	AnyBitSet
	// OneOf: the low 32 bits of argument Arg equal one of Values.
	OneOf
	// NoneOf: the low 32 bits of argument Arg equal none of Values. This is
	// an allow-list: every value not listed gets the rule's errno.
	NoneOf
)

// String returns the condition's name as used in docs/seccomp.md.
func (c Cond) String() string {
	switch c {
	case Always:
		return "always"
	case AnyBitSet:
		return "any bit set"
	case OneOf:
		return "one of"
	case NoneOf:
		return "none of"
	}
	return "Cond(?)"
}

// Rule is one row of the deny-list: when a call of Syscall matches Cond, it
// fails with Errno instead of reaching the kernel. Calls that match no rule
// are allowed. Rules never kill; only the architecture gate does.
//
// Arguments are always compared on their low 32 bits. Every argument a rule
// reads is an int or unsigned int in the kernel (clone's flags are truncated
// to 32 bits by kernel_clone_args), so the kernel ignores the upper half, and
// a filter that compared 64 bits could be bypassed by setting bit 32.
type Rule struct {
	// Syscall is the kernel's name, as in unistd.h ("clone", "_sysctl").
	Syscall string
	// Arches lists the architectures that have the rule; nil means all.
	// Assemble fails if a listed architecture has no such syscall.
	Arches []Arch
	// Cond says which calls the rule matches.
	Cond Cond
	// Arg is the index (0-5) of the argument Cond reads; unused for Always.
	Arg int
	// Values are the constants Cond compares with, by their x/sys names
	// ("CLONE_NEWUSER", "TIOCSTI") or as numbers ("0xffffffff") where x/sys
	// has no name.
	Values []string
	// Errno is the error the call returns, by its x/sys name ("EPERM").
	Errno string
	// Ptrace marks the rules that Options.AllowPtrace removes.
	Ptrace bool
	// SetID marks the rules compiled only with Options.NoSetID.
	SetID bool
	// Why is one line for the docs: what the rule blocks.
	Why string
	// Net says with which network the rule is part of the program.
	Net NetScope
}

// NetScope says for which namespaces a Rule is compiled.
type NetScope int

const (
	// AnyNet: in every program.
	AnyNet NetScope = iota
	// OwnNet: only when the command has its own namespaces (bwrap): its
	// sockets reach nothing of the host's.
	OwnNet
	// HostNet: only when the command shares the host's namespaces
	// (Options.HostNamespaces, --sandbox landlock).
	HostNet
	// HostNetTCP: with HostNamespaces and a network (not NoSockets).
	HostNetTCP
	// HostNoNet: with HostNamespaces and NoSockets.
	HostNoNet
)

// in reports whether a rule of scope s is compiled for opts.
func (s NetScope) in(opts Options) bool {
	switch s {
	case OwnNet:
		return !opts.HostNamespaces
	case HostNet:
		return opts.HostNamespaces
	case HostNetTCP:
		return opts.HostNamespaces && !opts.NoSockets
	case HostNoNet:
		return opts.HostNamespaces && opts.NoSockets
	}
	return true
}

// String returns the scope as docs/seccomp.md names it.
func (s NetScope) String() string {
	switch s {
	case OwnNet:
		return "bwrap"
	case HostNet:
		return "landlock"
	case HostNetTCP:
		return "landlock with a network"
	case HostNoNet:
		return "landlock without a network"
	}
	return "always"
}

// Personality values x/sys does not define (include/uapi/linux/personality.h).
const (
	// addrNoRandomize is ADDR_NO_RANDOMIZE: turn off ASLR for this process.
	addrNoRandomize = "0x0040000"
	// personalityQuery is 0xffffffff: read the persona, change nothing.
	personalityQuery = "0xffffffff"
)

var x86Only = []Arch{ArchX86_64}

// rules is the one table: Assemble compiles it, Rules exports it for docs
// and tests. It is never modified.
var rules = []Rule{
	// Other processes' memory.
	{Syscall: "ptrace", Cond: Always, Errno: "EPERM", Ptrace: true, Why: "reading and writing other processes (lifted by --ptrace)"},
	{Syscall: "process_vm_readv", Cond: Always, Errno: "EPERM", Why: "reading another process's memory (stays denied with --ptrace)"},
	{Syscall: "process_vm_writev", Cond: Always, Errno: "EPERM", Why: "writing another process's memory (stays denied with --ptrace)"},
	{Syscall: "kcmp", Cond: Always, Errno: "EPERM", Why: "probing other processes' kernel objects"},
	{Syscall: "pidfd_getfd", Cond: Always, Errno: "EPERM", Why: "stealing another process's file descriptors"},

	// Mounts and the root directory.
	{Syscall: "mount", Cond: Always, Errno: "EPERM", Why: "changing the sandbox's mounts"},
	{Syscall: "umount2", Cond: Always, Errno: "EPERM", Why: "uncovering what bwrap's mounts hide"},
	{Syscall: "pivot_root", Cond: Always, Errno: "EPERM", Why: "changing the root"},
	{Syscall: "chroot", Cond: Always, Errno: "EPERM", Why: "changing the root (chroot escapes)"},
	{Syscall: "move_mount", Cond: Always, Errno: "EPERM", Why: "the new mount API"},
	{Syscall: "open_tree", Cond: Always, Errno: "EPERM", Why: "the new mount API (cloning mounts)"},
	{Syscall: "fsopen", Cond: Always, Errno: "EPERM", Why: "the new mount API"},
	{Syscall: "fsconfig", Cond: Always, Errno: "EPERM", Why: "the new mount API"},
	{Syscall: "fsmount", Cond: Always, Errno: "EPERM", Why: "the new mount API"},
	{Syscall: "fspick", Cond: Always, Errno: "EPERM", Why: "the new mount API (reconfiguring mounts)"},
	{Syscall: "mount_setattr", Cond: Always, Errno: "EPERM", Why: "making read-only mounts writable"},

	// Namespaces.
	{Syscall: "setns", Cond: Always, Errno: "EPERM", Why: "joining other namespaces"},
	{Syscall: "unshare", Cond: Always, Errno: "EPERM", Why: "new namespaces (user namespaces expose more kernel surface)"},
	{Syscall: "clone", Cond: AnyBitSet, Arg: 0, Values: []string{
		"CLONE_NEWNS", "CLONE_NEWCGROUP", "CLONE_NEWUTS", "CLONE_NEWIPC",
		"CLONE_NEWUSER", "CLONE_NEWPID", "CLONE_NEWNET", "CLONE_NEWTIME",
	}, Errno: "EPERM", Why: "new namespaces through clone (flags are argument 0 on both architectures)"},
	{Syscall: "clone3", Cond: Always, Errno: "ENOSYS", Why: "its flags are in memory seccomp cannot read; ENOSYS makes libc fall back to clone"},

	// The machine itself.
	{Syscall: "kexec_load", Cond: Always, Errno: "EPERM", Why: "loading a new kernel"},
	{Syscall: "kexec_file_load", Cond: Always, Errno: "EPERM", Why: "loading a new kernel"},
	{Syscall: "reboot", Cond: Always, Errno: "EPERM", Why: "rebooting"},
	{Syscall: "init_module", Cond: Always, Errno: "EPERM", Why: "loading kernel modules"},
	{Syscall: "finit_module", Cond: Always, Errno: "EPERM", Why: "loading kernel modules"},
	{Syscall: "delete_module", Cond: Always, Errno: "EPERM", Why: "unloading kernel modules"},
	{Syscall: "swapon", Cond: Always, Errno: "EPERM", Why: "swap configuration"},
	{Syscall: "swapoff", Cond: Always, Errno: "EPERM", Why: "swap configuration"},
	{Syscall: "acct", Cond: Always, Errno: "EPERM", Why: "process accounting"},
	{Syscall: "quotactl", Cond: Always, Errno: "EPERM", Why: "disk quotas"},
	{Syscall: "settimeofday", Cond: Always, Errno: "EPERM", Why: "setting the clock"},
	{Syscall: "clock_settime", Cond: Always, Errno: "EPERM", Why: "setting the clock"},
	{Syscall: "clock_adjtime", Cond: Always, Errno: "EPERM", Why: "adjusting the clock"},
	{Syscall: "adjtimex", Cond: Always, Errno: "EPERM", Why: "adjusting the clock"},
	{Syscall: "sethostname", Cond: Always, Errno: "EPERM", Why: "renaming the host"},
	{Syscall: "setdomainname", Cond: Always, Errno: "EPERM", Why: "renaming the domain"},
	{Syscall: "syslog", Cond: Always, Errno: "EPERM", Why: "reading and clearing the kernel log (addresses leak)"},
	{Syscall: "lookup_dcookie", Cond: Always, Errno: "EPERM", Why: "profiling interface (removed in Linux 6.8)"},

	// Keyrings.
	{Syscall: "keyctl", Cond: Always, Errno: "EPERM", Why: "kernel keyrings are not namespaced"},
	{Syscall: "add_key", Cond: Always, Errno: "EPERM", Why: "kernel keyrings are not namespaced"},
	{Syscall: "request_key", Cond: Always, Errno: "EPERM", Why: "kernel keyrings are not namespaced"},

	// Large attack surface.
	{Syscall: "bpf", Cond: Always, Errno: "EPERM", Why: "eBPF programs and maps"},
	{Syscall: "perf_event_open", Cond: Always, Errno: "EPERM", Why: "performance counters (side channels, kernel bugs)"},
	{Syscall: "userfaultfd", Cond: Always, Errno: "EPERM", Why: "stalling the kernel mid-copy (race exploitation)"},
	{Syscall: "io_uring_setup", Cond: Always, Errno: "EPERM", Why: "io_uring runs syscalls that seccomp never sees"},
	{Syscall: "io_uring_enter", Cond: Always, Errno: "EPERM", Why: "io_uring runs syscalls that seccomp never sees"},
	{Syscall: "io_uring_register", Cond: Always, Errno: "EPERM", Why: "io_uring runs syscalls that seccomp never sees"},
	{Syscall: "open_by_handle_at", Cond: Always, Errno: "EPERM", Why: "opening files by handle bypasses the mount tree (shocker)"},
	{Syscall: "name_to_handle_at", Cond: Always, Errno: "EPERM", Why: "file handles (see open_by_handle_at)"},
	{Syscall: "fanotify_init", Cond: Always, Errno: "EPERM", Why: "filesystem-wide event monitoring"},

	// Legacy x86 interfaces.
	{Syscall: "iopl", Arches: x86Only, Cond: Always, Errno: "EPERM", Why: "raw I/O port access"},
	{Syscall: "ioperm", Arches: x86Only, Cond: Always, Errno: "EPERM", Why: "raw I/O port access"},
	{Syscall: "modify_ldt", Arches: x86Only, Cond: Always, Errno: "EPERM", Why: "segment descriptors (a history of kernel bugs)"},
	{Syscall: "uselib", Arches: x86Only, Cond: Always, Errno: "EPERM", Why: "obsolete a.out loader"},
	{Syscall: "_sysctl", Arches: x86Only, Cond: Always, Errno: "EPERM", Why: "obsolete sysctl interface"},
	{Syscall: "sysfs", Arches: x86Only, Cond: Always, Errno: "EPERM", Why: "obsolete filesystem-type interface"},
	// aarch64 reserves number 42 for nfsservctl (sys_ni_syscall), and x/sys
	// lists it, so the rule costs nothing there and holds on both.
	{Syscall: "nfsservctl", Cond: Always, Errno: "EPERM", Why: "obsolete NFS server interface"},

	// Argument rules.
	{Syscall: "ioctl", Cond: OneOf, Arg: 1, Values: []string{"TIOCSTI", "TIOCLINUX"}, Errno: "EPERM",
		Why: "pushing keystrokes into the controlling terminal (escapes to the harness's shell)"},
	{Syscall: "socket", Cond: NoneOf, Arg: 0, Values: []string{"AF_UNIX", "AF_INET", "AF_INET6", "AF_NETLINK"}, Errno: "EAFNOSUPPORT",
		Net: OwnNet, Why: "packet, vsock, crypto, key, bluetooth... sockets (rarely used, often buggy)"},
	// On the host's network the three socket rules chain: a call is
	// refused when any of them matches. Landlock confines TCP by port
	// and nothing else: AF_UNIX would reach the host's daemons (its
	// abstract names are scoped only from ABI 6, its paths not at all),
	// netlink the host's routing and interfaces, UDP any address.
	{Syscall: "socket", Cond: NoneOf, Arg: 0, Values: []string{"AF_INET", "AF_INET6"}, Errno: "EAFNOSUPPORT",
		Net: HostNetTCP, Why: "every family but IPv4 and IPv6 (AF_UNIX reaches the host's daemons, netlink its interfaces); socketpair stays allowed"},
	// Every socket type but SOCK_STREAM (1) has one of bits 1-3 set
	// (SOCK_DGRAM 2, SOCK_RAW 3, SOCK_RDM 4, SOCK_SEQPACKET 5, SOCK_DCCP
	// 6, SOCK_PACKET 10); SOCK_NONBLOCK and SOCK_CLOEXEC lie above them.
	{Syscall: "socket", Cond: AnyBitSet, Arg: 1, Values: []string{"0xe"}, Errno: "EPERM",
		Net: HostNetTCP, Why: "UDP, raw and every type but SOCK_STREAM (Landlock confines TCP only)"},
	{Syscall: "socket", Cond: NoneOf, Arg: 2, Values: []string{"0x0", "0x6"}, Errno: "EPROTONOSUPPORT",
		Net: HostNetTCP, Why: "stream protocols but TCP (MPTCP, SCTP): Landlock's port rules cover plain TCP only"},
	{Syscall: "socket", Cond: Always, Errno: "EAFNOSUPPORT", Net: HostNoNet,
		Why: "every socket: a run without a network on the host's network namespace"},

	// The host's IPC, which a command sharing the host's namespaces
	// (landlock) would otherwise reach: ids are small numbers, so every
	// call that takes one is refused, not only the lookups.
	{Syscall: "shmget", Cond: Always, Errno: "EPERM", Net: HostNet, Why: "the host's System V shared memory"},
	{Syscall: "shmat", Cond: Always, Errno: "EPERM", Net: HostNet, Why: "the host's System V shared memory (by a guessed id)"},
	{Syscall: "shmctl", Cond: Always, Errno: "EPERM", Net: HostNet, Why: "the host's System V shared memory"},
	{Syscall: "msgget", Cond: Always, Errno: "EPERM", Net: HostNet, Why: "the host's System V message queues"},
	{Syscall: "msgsnd", Cond: Always, Errno: "EPERM", Net: HostNet, Why: "the host's System V message queues"},
	{Syscall: "msgrcv", Cond: Always, Errno: "EPERM", Net: HostNet, Why: "the host's System V message queues"},
	{Syscall: "msgctl", Cond: Always, Errno: "EPERM", Net: HostNet, Why: "the host's System V message queues"},
	{Syscall: "semget", Cond: Always, Errno: "EPERM", Net: HostNet, Why: "the host's System V semaphores"},
	{Syscall: "semop", Arches: x86Only, Cond: Always, Errno: "EPERM", Net: HostNet, Why: "the host's System V semaphores"},
	{Syscall: "semtimedop", Cond: Always, Errno: "EPERM", Net: HostNet, Why: "the host's System V semaphores"},
	{Syscall: "semctl", Cond: Always, Errno: "EPERM", Net: HostNet, Why: "the host's System V semaphores"},
	{Syscall: "mq_open", Cond: Always, Errno: "EPERM", Net: HostNet, Why: "the host's POSIX message queues"},

	// With --map-owner the command's new files are the directory
	// owner's on the host (root's, in root's own directory): a set-user-
	// or set-group-ID bit there would hand that owner's rights to whoever
	// runs the file on the host. Every call that sets a mode is refused
	// the two bits (S_ISUID 0x800, S_ISGID 0x400); openat2 carries its
	// mode in a struct seccomp cannot read, so it is refused whole
	// (ENOSYS: callers fall back to openat). mkdir is left alone: the
	// kernel drops both bits from its mode.
	{Syscall: "chmod", Arches: x86Only, Cond: AnyBitSet, Arg: 1, Values: setIDBits, Errno: "EPERM", SetID: true, Why: setIDWhy},
	{Syscall: "fchmod", Cond: AnyBitSet, Arg: 1, Values: setIDBits, Errno: "EPERM", SetID: true, Why: setIDWhy},
	{Syscall: "fchmodat", Cond: AnyBitSet, Arg: 2, Values: setIDBits, Errno: "EPERM", SetID: true, Why: setIDWhy},
	{Syscall: "fchmodat2", Cond: AnyBitSet, Arg: 2, Values: setIDBits, Errno: "EPERM", SetID: true, Why: setIDWhy},
	{Syscall: "open", Arches: x86Only, Cond: AnyBitSet, Arg: 2, Values: setIDBits, Errno: "EPERM", SetID: true, Why: setIDWhy},
	{Syscall: "creat", Arches: x86Only, Cond: AnyBitSet, Arg: 1, Values: setIDBits, Errno: "EPERM", SetID: true, Why: setIDWhy},
	{Syscall: "openat", Cond: AnyBitSet, Arg: 3, Values: setIDBits, Errno: "EPERM", SetID: true, Why: setIDWhy},
	{Syscall: "openat2", Cond: Always, Errno: "ENOSYS", SetID: true, Why: "its mode is out of seccomp's reach (see the set-ID rules); callers fall back to openat"},
	{Syscall: "mknod", Arches: x86Only, Cond: AnyBitSet, Arg: 1, Values: setIDBits, Errno: "EPERM", SetID: true, Why: setIDWhy},
	{Syscall: "mknodat", Cond: AnyBitSet, Arg: 2, Values: setIDBits, Errno: "EPERM", SetID: true, Why: setIDWhy},

	// personality: 0 (PER_LINUX) and ADDR_NO_RANDOMIZE are what setarch -R and
	// the sanitizers (ASan, TSan, MSan re-exec with ASLR off) set; the
	// 0xffffffff query changes nothing. Everything else is refused:
	// READ_IMPLIES_EXEC makes readable memory executable, MMAP_PAGE_ZERO
	// maps page 0 (NULL-dereference exploits), foreign personas change
	// signal and errno mappings. PER_LINUX32 is left out on purpose: its only
	// use is making uname report a 32-bit machine for a 32-bit build, and
	// 32-bit code cannot run here (the arch gate kills its syscalls).
	{Syscall: "personality", Cond: NoneOf, Arg: 0, Values: []string{"0x0", addrNoRandomize, personalityQuery}, Errno: "EPERM",
		Why: "execution domains other than plain Linux with or without ASLR (READ_IMPLIES_EXEC, MMAP_PAGE_ZERO, ...)"},
}

// setIDBits and setIDWhy are the set-ID rules' values and reason.
var setIDBits = []string{"0x800", "0x400"}

const setIDWhy = "set-user- and set-group-ID bits, which with --map-owner would be the directory owner's on the host"

// Rules returns a copy of the deny-list that Assemble compiles, in the order
// it compiles it. Changing the copy changes nothing.
func Rules() []Rule {
	out := make([]Rule, len(rules))
	for i, r := range rules {
		r.Arches = slices.Clone(r.Arches)
		r.Values = slices.Clone(r.Values)
		out[i] = r
	}
	return out
}

// appliesTo reports whether r is part of the program for a.
func (r Rule) appliesTo(a Arch) bool {
	return r.Arches == nil || slices.Contains(r.Arches, a)
}
