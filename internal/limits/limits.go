package limits

import (
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"
)

// Limits are the resource limits of one sandbox. A zero field means
// unlimited; no field may be negative.
type Limits struct {
	// Memory is the most memory, in bytes, the sandbox may hold: the sum
	// over all its processes, not a per-process bound. Zero: unlimited.
	// At least MinMemory when set.
	Memory int64
	// Pids is the most tasks (processes and threads) the sandbox may hold
	// at once, sandbox-run's own init and its threads included (see
	// Env.OverheadTasks). Zero: unlimited.
	Pids int64
	// NoFile is the per-process limit on open descriptors (RLIMIT_NOFILE).
	// Zero: the inherited limit.
	NoFile int64
	// FSize is the largest file, in bytes, a process may write
	// (RLIMIT_FSIZE). Zero: unlimited.
	FSize int64
	// CPUTime is the CPU time the sandbox may use: per process by
	// RLIMIT_CPU (rounded up to whole seconds) and, where it can be
	// measured, summed over the sandbox. Zero: unlimited.
	CPUTime time.Duration
}

// MinMemory is the smallest memory limit accepted: below it not even an
// exec succeeds, so a smaller value is a mistake, not a policy. It is the
// one floor: package policy refuses a policy below it with this rule.
const MinMemory = 1 << 20

// MinNoFile is the smallest open-file limit accepted: 0, 1 and 2 are
// always open, and with fewer than one more the command cannot even open
// its own executable's interpreter.
const MinNoFile = 4

// DefaultMemoryOf is the memory ceiling of a sandbox that asks for none on
// a host with memTotal bytes (MemTotal): half of it, rounded down to a
// multiple of 64 MiB, and at least 64 MiB. Half leaves the host, its
// editors and agents, the other half however the command allocates; the
// rounding makes the value the report shows readable.
func DefaultMemoryOf(memTotal int64) int64 {
	const step = 64 << 20
	return max(memTotal/2/step*step, step)
}

// OOMScoreAdj is the oom_score_adj every sandbox's processes get: the
// highest, so that when the host runs out of memory the kernel's OOM killer
// ends a sandboxed command before any of the host's own processes. Raising
// one's own value needs no privilege.
const OOMScoreAdj = 1000

// ErrInvalid is wrapped by every error of Validate (an *InvalidError)
// and of the functions that refuse a malformed request.
var ErrInvalid = errors.New("invalid limit")

// InvalidError names the first field of a Limits that cannot be enforced
// as written. Field is memory, pids, nofile, fsize or cpu_time; Min, when
// not 0, is the floor the value is below (0: the value is negative).
type InvalidError struct {
	Field string
	Value int64
	Min   int64
}

func (e *InvalidError) Error() string {
	if e.Min != 0 {
		return fmt.Sprintf("limits: %s: %d is below the minimum of %d", e.Field, e.Value, e.Min)
	}
	return fmt.Sprintf("limits: %s: negative", e.Field)
}

// Unwrap returns ErrInvalid.
func (e *InvalidError) Unwrap() error { return ErrInvalid }

// Validate returns nil when l can be enforced as written, or an
// *InvalidError naming the first bad field: a negative value, a memory
// limit below MinMemory or an open-file limit below MinNoFile. It is the
// one owner of these rules; policy.Policy.Validate applies it.
func (l Limits) Validate() error {
	for _, f := range []struct {
		field  string
		v, min int64
	}{
		{"memory", l.Memory, MinMemory}, {"pids", l.Pids, 0}, {"nofile", l.NoFile, MinNoFile},
		{"fsize", l.FSize, 0}, {"cpu_time", int64(l.CPUTime), 0},
	} {
		switch {
		case f.v < 0:
			return &InvalidError{Field: f.field, Value: f.v}
		case f.v > 0 && f.v < f.min:
			return &InvalidError{Field: f.field, Value: f.v, Min: f.min}
		}
	}
	return nil
}

// Kind says why a sandbox ended, when it was a limit and not the command.
type Kind int

// The kinds of ending. None means the command ended on its own: its exit
// status is its own.
const (
	None Kind = iota
	TimedOut
	MemoryLimit
	PidsLimit
	CpuLimit
)

// String returns the name used in the report: "none", "timed_out",
// "memory_limit", "pids_limit", "cpu_limit".
func (k Kind) String() string {
	switch k {
	case None:
		return "none"
	case TimedOut:
		return "timed_out"
	case MemoryLimit:
		return "memory_limit"
	case PidsLimit:
		return "pids_limit"
	case CpuLimit:
		return "cpu_limit"
	}
	return "kind(" + strconv.Itoa(int(k)) + ")"
}

// MarshalText encodes k as its String.
func (k Kind) MarshalText() ([]byte, error) { return []byte(k.String()), nil }

// Exceeded says that a watcher saw a limit exceeded. The caller is expected
// to end the whole sandbox and report Kind.
type Exceeded struct {
	Kind Kind
	// Usage and Limit are in the limit's unit: bytes for MemoryLimit,
	// tasks for PidsLimit, nanoseconds for CpuLimit.
	Usage, Limit int64
}

func (e Exceeded) String() string {
	return fmt.Sprintf("%s: %d > %d", e.Kind, e.Usage, e.Limit)
}

// Method is how one limit is enforced, as the report names it.
type Method string

// The methods, strongest first.
const (
	ByCgroup   Method = "cgroup"  // the kernel, for the whole sandbox (cgroup v2)
	ByRlimit   Method = "rlimit"  // the kernel, per process or per user namespace
	BySampler  Method = "sampled" // sandbox-run reads /proc and ends the sandbox; can overshoot
	NotLimited Method = "none"    // no limit was asked for
)

// Enforcement says, for each limit, how it is held. It never names a method
// stronger than the one set up.
type Enforcement struct {
	Memory  Method `json:"memory"`
	Pids    Method `json:"pids"`
	CPUTime Method `json:"cpu_time"`
	NoFile  Method `json:"nofile"`
	FSize   Method `json:"fsize"`
	Core    Method `json:"core"` // core dumps: always off by RLIMIT_CORE 0
}

// Env is what NewPlan needs to know about the sandbox being set up.
type Env struct {
	// Cgroup is true when the sandbox will run in a cgroup of its own
	// (Create succeeded or will be called with Plan.Cgroup). CgroupMemory
	// and CgroupPids say whether the memory and pids controllers are
	// enabled for it (see Enabled).
	Cgroup, CgroupMemory, CgroupPids bool
	// UserNS is true when the command runs in a user namespace of its own
	// and the kernel counts RLIMIT_NPROC per user namespace and uid (Linux
	// 5.14 and later: NProcPerUserNS), so that the limit, set inside,
	// counts only the sandbox's tasks.
	UserNS bool
	// HostRoot is true when the command runs as host uid 0, whom the kernel
	// exempts from RLIMIT_NPROC.
	HostRoot bool
	// OverheadTasks is added to Limits.Pids for the tasks that are not the
	// command's: sandbox-run's init (a Go program with several threads) and
	// bwrap's monitor process.
	OverheadTasks int64
	// DefaultMemory says Limits.Memory is the default ceiling, not one the
	// caller asked for. Sampled, it then gets no RLIMIT_DATA backstop: the
	// backstop would send every run through the exec shim (RLIMIT_DATA is
	// not among what the launchers' shells set), and at half the host's
	// memory the sampler's overshoot is small beside the ceiling.
	DefaultMemory bool
}

// Plan is how a Limits value is held in one sandbox: what to write into the
// cgroup, which rlimits init applies, what the sampler watches, and what the
// report says. Build it with NewPlan.
type Plan struct {
	Limits Limits
	// Cgroup holds the limits for Create (Memory, Pids with the overhead
	// added) and for Cgroup.Watch (CPUTime, summed from cpu.stat). Zero
	// when there is no cgroup.
	Cgroup Limits
	// Rlimits are for init (or tier 0's child) to Apply before it starts
	// the command.
	Rlimits []Rlimit
	// Sample holds the limits Sample must watch over the process tree; a
	// zero value means no sampler is needed.
	Sample Limits
	How    Enforcement
}

// DataBackstop returns the per-process RLIMIT_DATA set when memory is only
// sampled: 1.25 times the limit plus 32 MiB. It stops a single process that
// maps memory faster than the sampler reads it; the sampler, not this,
// is what holds the total.
func DataBackstop(memory int64) uint64 {
	return uint64(memory) + uint64(memory)/4 + 32<<20
}

// NewPlan decides how to hold l in a sandbox described by env. It returns an
// error wrapping ErrInvalid if l is invalid. The choice, per limit:
//
//   - Memory: the cgroup (memory.max, memory.swap.max 0, memory.oom.group)
//     when the memory controller is enabled; else the sampler, plus
//     RLIMIT_DATA at DataBackstop per process unless env.DefaultMemory.
//   - Pids: the cgroup (pids.max) when the pids controller is enabled; else
//     RLIMIT_NPROC when the command has its own user namespace and is not
//     host root; else the sampler.
//   - CPUTime: RLIMIT_CPU per process always (SIGXCPU at the limit rounded
//     up to a second, SIGKILL a second later); the total over the sandbox
//     from the cgroup's cpu.stat when there is a cgroup, else sampled.
//   - NoFile, FSize: RLIMIT_NOFILE, RLIMIT_FSIZE. Core dumps: RLIMIT_CORE 0.
func NewPlan(l Limits, env Env) (Plan, error) {
	if err := l.Validate(); err != nil {
		return Plan{}, err
	}
	if env.OverheadTasks < 0 {
		return Plan{}, fmt.Errorf("limits: overhead tasks: negative: %w", ErrInvalid)
	}
	p := Plan{Limits: l, How: Enforcement{
		Memory: NotLimited, Pids: NotLimited, CPUTime: NotLimited,
		NoFile: NotLimited, FSize: NotLimited, Core: ByRlimit,
	}}
	p.Rlimits = append(p.Rlimits, Rlimit{Resource: Core, Soft: 0, Hard: 0})

	if l.Memory > 0 {
		if env.Cgroup && env.CgroupMemory {
			p.Cgroup.Memory = l.Memory
			p.How.Memory = ByCgroup
		} else {
			p.Sample.Memory = l.Memory
			if !env.DefaultMemory {
				b := DataBackstop(l.Memory)
				p.Rlimits = append(p.Rlimits, Rlimit{Resource: Data, Soft: b, Hard: b})
			}
			p.How.Memory = BySampler
		}
	}
	if l.Pids > 0 {
		n := l.Pids + env.OverheadTasks
		switch {
		case env.Cgroup && env.CgroupPids:
			p.Cgroup.Pids = n
			p.How.Pids = ByCgroup
		case env.UserNS && !env.HostRoot:
			p.Rlimits = append(p.Rlimits, Rlimit{Resource: NProc, Soft: uint64(n), Hard: uint64(n)})
			p.How.Pids = ByRlimit
		default:
			p.Sample.Pids = n
			p.How.Pids = BySampler
		}
	}
	if l.CPUTime > 0 {
		s := cpuSeconds(l.CPUTime)
		p.Rlimits = append(p.Rlimits, Rlimit{Resource: CPU, Soft: s, Hard: s + 1})
		if env.Cgroup {
			p.Cgroup.CPUTime = l.CPUTime
			p.How.CPUTime = ByCgroup
		} else {
			p.Sample.CPUTime = l.CPUTime
			p.How.CPUTime = BySampler
		}
	}
	if l.NoFile > 0 {
		p.Rlimits = append(p.Rlimits, Rlimit{Resource: NoFile, Soft: uint64(l.NoFile), Hard: uint64(l.NoFile)})
		p.How.NoFile = ByRlimit
	}
	if l.FSize > 0 {
		p.Rlimits = append(p.Rlimits, Rlimit{Resource: FSize, Soft: uint64(l.FSize), Hard: uint64(l.FSize)})
		p.How.FSize = ByRlimit
	}
	return p, nil
}

// Rlimits returns the rlimits for l when there is no cgroup and no user
// namespace: NewPlan(l, Env{}).Rlimits. It returns nil if l is invalid.
func Rlimits(l Limits) []Rlimit {
	p, err := NewPlan(l, Env{})
	if err != nil {
		return nil
	}
	return p.Rlimits
}

// cpuSeconds rounds d up to whole seconds, at least 1.
func cpuSeconds(d time.Duration) uint64 {
	s := uint64((d + time.Second - 1) / time.Second)
	if s == 0 {
		s = 1
	}
	return s
}

// Resource names an rlimit portably; the names are those of the encoding.
type Resource string

// The resources sandbox-run sets.
const (
	Core   Resource = "core"   // RLIMIT_CORE, bytes
	NoFile Resource = "nofile" // RLIMIT_NOFILE, descriptors
	FSize  Resource = "fsize"  // RLIMIT_FSIZE, bytes
	CPU    Resource = "cpu"    // RLIMIT_CPU, seconds
	NProc  Resource = "nproc"  // RLIMIT_NPROC, tasks of the real uid (per user namespace)
	Data   Resource = "data"   // RLIMIT_DATA, bytes of private writable mappings
)

// Resources returns every resource sandbox-run sets, in a fixed order.
func Resources() []Resource { return []Resource{Core, NoFile, FSize, CPU, NProc, Data} }

// Infinity is RLIM_INFINITY.
const Infinity = math.MaxUint64

// Rlimit is one resource limit.
type Rlimit struct {
	Resource   Resource
	Soft, Hard uint64
}

// IntervalFunc returns how long a watcher waits before its next sample,
// given the usage it just saw and the limit (same unit). It is called with
// whichever of memory and tasks is closest to its limit.
type IntervalFunc func(usage, limit int64) time.Duration

// The sampling periods of DefaultInterval.
const (
	IdleInterval = 50 * time.Millisecond
	SlowInterval = 10 * time.Millisecond
	FastInterval = time.Millisecond
)

// DefaultInterval samples every IdleInterval while usage is under a 64th
// of the limit, every SlowInterval from there, and every FastInterval once
// usage is at half the limit or more.
//
// Why the idle period: a sample reads every thread of the tree, and an
// idle sandbox sampled every SlowInterval cost its launcher about a tenth
// of a core. Far from the limit, one IdleInterval cannot carry usage past
// it: that would take growing by 63/64 of the limit in 50 ms, about 20
// times the limit per second (20 GiB/s for a 1 GiB memory ceiling; for
// the default process ceiling, 4,000 new tasks in 50 ms), and an explicit
// --memory also has the kernel's per-process RLIMIT_DATA backstop
// (DataBackstop).
func DefaultInterval(usage, limit int64) time.Duration {
	switch {
	case limit > 0 && usage >= limit/2:
		return FastInterval
	case limit > 0 && usage < limit/64:
		return IdleInterval
	}
	return SlowInterval
}

// Evidence is what the launcher knows when the sandbox has ended, for
// Classify.
type Evidence struct {
	// Killed is why the launcher itself ended the sandbox (its timer fired:
	// TimedOut; a watcher sent Exceeded: that Kind), None if it did not.
	Killed Kind
	// Signal is the signal that ended the command (from init's 128+N), 0
	// if it exited with a status of its own.
	Signal int
	// OOMKills is the cgroup's memory.events oom_kill plus
	// oom_group_kill, 0 without a cgroup.
	OOMKills int64
	// CPULimit is the CPUTime limit in force (0: none), CPUTime the CPU time
	// the sandbox used as far as the launcher measured it (cgroup cpu.stat,
	// or init's rusage), 0 if unknown.
	CPULimit, CPUTime time.Duration
}

// CPUSlack is how close to its CPU budget a sandbox killed by SIGKILL must
// have come for Classify to call it CpuLimit (RLIMIT_CPU's hard limit sends
// SIGKILL; so do many other things).
const CPUSlack = 50 * time.Millisecond

// The signals Classify reads, by number, so that this file builds on every
// platform; both are the same on every Linux architecture Go supports but
// mips, alpha and sparc, which sandbox-run does not ship for.
const (
	sigKILL = 9
	sigXCPU = 24
)

// Classify says whether the sandbox ended because of a limit. The rules,
// in order:
//
//  1. If the launcher ended it (Killed is not None), that is the answer:
//     the first reason the launcher acted on wins.
//  2. A command that exited with a status of its own (Signal 0) is never
//     reclassified, whatever the counters say.
//  3. Killed by a signal after the cgroup's OOM killer ran: MemoryLimit.
//  4. SIGXCPU with a CPU limit in force, or SIGKILL with the measured CPU
//     time within CPUSlack of the limit or above (RLIMIT_CPU's hard limit,
//     a second after the soft one): CpuLimit.
//  5. Anything else: None (the command's own death).
func Classify(e Evidence) Kind {
	switch {
	case e.Killed != None:
		return e.Killed
	case e.Signal == 0:
		return None
	case e.OOMKills > 0:
		return MemoryLimit
	case e.CPULimit > 0 && e.Signal == sigXCPU:
		return CpuLimit
	case e.CPULimit > 0 && e.Signal == sigKILL && e.CPUTime >= e.CPULimit-CPUSlack:
		return CpuLimit
	}
	return None
}

// ErrNoCgroup is wrapped by FindDelegated when no cgroup v2 directory can be
// used.
var ErrNoCgroup = errors.New("no delegated cgroup v2")

// ErrController is wrapped by Create when a limit needs a controller that
// is not enabled for the base's children.
var ErrController = errors.New("cgroup controller not enabled")

// Events are the cgroup's limit counters.
type Events struct {
	// OOMKills is memory.events oom_kill: processes the OOM killer ended
	// because the cgroup reached memory.max. OOMGroupKills is
	// oom_group_kill: times it ended the whole cgroup (memory.oom.group).
	OOMKills, OOMGroupKills int64
	// PidsMax is pids.events max: forks and clones refused because the
	// cgroup reached pids.max.
	PidsMax int64
}

// Kind returns MemoryLimit after an OOM kill, else PidsLimit after a
// refused fork, else None.
func (e Events) Kind() Kind {
	switch {
	case e.OOMKills > 0 || e.OOMGroupKills > 0:
		return MemoryLimit
	case e.PidsMax > 0:
		return PidsLimit
	}
	return None
}

// Inotify is a per-sandbox ceiling on inotify instances and watches.
type Inotify struct {
	Instances, Watches int64
}

// InotifyShare is the part of the user's inotify allowance one sandbox
// gets: a quarter. The kernel counts inotify instances and watches per
// user over every user namespace below the one that set the limit, so a
// sandbox without a ceiling of its own could take every instance the user
// has (fs.inotify.max_user_instances, often 128) and leave the user's
// editors without file watching until it ends.
const InotifyShare = 4

// Script is the sh script that, run in a sandbox's user namespace
// with CAP_SYS_RESOURCE there, sets that namespace's
// user.max_inotify_instances and user.max_inotify_watches to c and prints
// both as read back, one per line. A user namespace may lower them for
// itself and every namespace below it; the kernel holds the lowest
// ceiling on the way up.
func (c Inotify) Script() string {
	return fmt.Sprintf("echo %d > /proc/sys/user/max_inotify_instances && echo %d > /proc/sys/user/max_inotify_watches && "+
		"cat /proc/sys/user/max_inotify_instances /proc/sys/user/max_inotify_watches", c.Instances, c.Watches)
}

// CheckReadBack says whether out, what Script printed, is c.
func (c Inotify) CheckReadBack(out string) error {
	f := strings.Fields(out)
	if len(f) != 2 || f[0] != strconv.FormatInt(c.Instances, 10) || f[1] != strconv.FormatInt(c.Watches, 10) {
		return fmt.Errorf("limits: inotify ceiling reads back as %q, not %d %d", out, c.Instances, c.Watches)
	}
	return nil
}
