package sandbox

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/sandbox-run/sandbox-run/internal/limits"

	"github.com/sandbox-run/sandbox-run/internal/exitcode"
	"github.com/sandbox-run/sandbox-run/policy"
)

// Protection is one protection of a run: whether it was configured and,
// where the kernel's own view could be read from inside the sandbox,
// whether that view confirms it. Verified is nil when nothing could be read
// back for it; the report never turns "configured" into "verified" by
// assumption.
type Protection struct {
	// Name is the protection: user_namespace, no_new_privs, seccomp,
	// capabilities_dropped, ...
	Name string `json:"name"`
	// Configured is set when sandbox-run asked for it.
	Configured bool `json:"configured"`
	// Verified is what the read-back from inside says: true confirmed,
	// false contradicted, null not read.
	Verified *bool `json:"verified"`
	// Detail says what was read back, or why nothing was.
	Detail string `json:"detail,omitempty"`
}

// Exit classifies how a run ended. A report without one is of a run whose
// command never started, or of a dry run.
type Exit struct {
	// Code is the exit status sandbox-run exits with (see ExitCode).
	Code int `json:"code"`
	// Class says how the run ended (see the ExitClass constants).
	Class ExitClass `json:"class"`
	// Reason says in one line why sandbox-run ended the command (a limit,
	// the timeout, ctx, the mechanism killed); "" when it ended on its own
	// or could not be started.
	Reason string `json:"reason,omitempty"`
	// Usage and Limit are what the limit that ended the run measured and
	// allowed (bytes of memory, tasks, nanoseconds of CPU time); 0 for
	// any other end, or when the kernel ended it before a measure.
	Usage int64 `json:"usage,omitempty"`
	Limit int64 `json:"limit,omitempty"`
}

// ExitClass names how a run ended, in one style (snake case) across
// mechanisms.
type ExitClass string

// The classes of Exit. Each maps to exit codes as ExitCode says.
const (
	ClassExited          ExitClass = "exited"           // the command's own status
	ClassSignaled        ExitClass = "signaled"         // 128+N: a signal N that no limit explains
	ClassTimedOut        ExitClass = "timed_out"        // 124: the policy's timeout ended the sandbox
	ClassMemoryLimit     ExitClass = "memory_limit"     // 128+9: --memory ended the sandbox
	ClassPidsLimit       ExitClass = "pids_limit"       // 128+9: --pids ended the sandbox
	ClassCPULimit        ExitClass = "cpu_limit"        // 128+9 or 128+24: --cpu-time ended the sandbox
	ClassNotFound        ExitClass = "not_found"        // 127: the command was not found inside
	ClassNotExecutable   ExitClass = "not_executable"   // 126: found, but not executable inside
	ClassMechanismKilled ExitClass = "mechanism_killed" // 125: the mechanism was killed from outside
	ClassCancelled       ExitClass = "cancelled"        // the caller's ctx ended the sandbox (128+9)
	ClassSweepIncomplete ExitClass = "sweep_incomplete" // 125: the command ended, but the sweep after it could not walk everything
)

// The exit statuses sandbox-run itself gives (the CLI contract), from
// internal/exitcode's one table: every other status is the command's own.
const (
	ExitSetup         = exitcode.Setup // refused or not set up (the command never ran), or the mechanism killed
	ExitNotExecutable = exitcode.NotExecutable
	ExitNotFound      = exitcode.NotFound
)

// execClass is the class of a command that could not be started: code is
// ExitNotExecutable or ExitNotFound.
func execClass(code int) ExitClass {
	if code == ExitNotExecutable {
		return ClassNotExecutable
	}
	return ClassNotFound
}

// digestVersion names the canonical form hashed into EnvironmentDigest;
// change it whenever that form changes.
const digestVersion = "sandbox-run/environment/v2"

// environmentDigest hashes what the run's environment was: the protections
// configured, the limits, the network and the mounts. Not the command, its
// arguments or its output. Two runs under the same policy on the same node
// get the same digest; a run with any protection, limit, mount or network
// setting changed gets another.
func environmentDigest(r *Report) string {
	type prot struct {
		Name       string `json:"n"`
		Configured bool   `json:"c"`
	}
	canon := struct {
		V          string   `json:"v"`
		Tier       int      `json:"tier"`
		Mechanism  string   `json:"mechanism"`
		Platform   string   `json:"platform"`
		Prot       []prot   `json:"protections"`
		Ptrace     bool     `json:"ptrace"`
		Network    string   `json:"network"`
		Allow      []string `json:"allow"`
		HTTP       []string `json:"http,omitempty"`
		Writable   []string `json:"writable"`
		ReadOnly   []string `json:"read_only"`
		Protected  []string `json:"protected"`
		TmpSize    int64    `json:"tmp_size"`
		ShmSize    int64    `json:"shm_size"`
		Limits     []Limit  `json:"limits"`
		HostUID    int      `json:"host_uid"`
		HostGID    int      `json:"host_gid"`
		EnvNames   []string `json:"env"`
		TimeoutSec float64  `json:"timeout"`
	}{
		V: digestVersion, Tier: r.Tier, Mechanism: r.Mechanism, Platform: r.Platform,
		Network: r.Network, HostUID: r.HostUID, HostGID: r.HostGID, TmpSize: r.TmpSize, ShmSize: tmpfsSize(r.Tmpfs, "/dev/shm"),
		Allow: sorted(r.AllowHosts), HTTP: r.TLS.rules(), Writable: sorted(r.Writable), ReadOnly: sorted(r.ReadOnly),
		Protected: sorted(append(append(append([]string(nil), r.Protected...), r.Watched...), r.Copied...)), EnvNames: sorted(r.EnvNames), Limits: r.Limits, TimeoutSec: r.TimeoutSec,
	}
	if r.Seccomp != nil {
		canon.Ptrace = r.Seccomp.Ptrace
	}
	for _, p := range r.Protections {
		canon.Prot = append(canon.Prot, prot{p.Name, p.Configured})
	}
	slices.SortFunc(canon.Prot, func(a, b prot) int { return strings.Compare(a.Name, b.Name) })
	b, _ := json.Marshal(canon)
	sum := sha256.Sum256(b)
	return "sha256:" + hex.EncodeToString(sum[:])
}

func sorted(s []string) []string {
	out := append([]string{}, s...)
	slices.Sort(out)
	return out
}

// TmpfsReport is one file system in memory that the sandbox mounts.
type TmpfsReport struct {
	// Path is where it is mounted inside.
	Path string `json:"path"`
	// Size is the ceiling in bytes; 0 means none (see Enforced).
	Size int64 `json:"size"`
	// Enforced says how the ceiling is held: the tmpfs size= option set
	// through bwrap --size, read-only, or "none: ..." with the reason.
	Enforced string `json:"enforced"`
}

// ReadScanReport is the search of the --read paths (read_scan) or of the
// writable directories (write_scan) for Unix sockets and FIFOs, which no
// mount flag stops the command from using.
type ReadScanReport struct {
	// Paths is how many paths were searched, Entries how many entries
	// were looked at, Seconds how long that took.
	Paths   int     `json:"paths"`
	Entries int     `json:"entries"`
	Seconds float64 `json:"seconds"`
	// Covered lists, as seen inside, each socket and FIFO found; each one
	// has /dev/null bound over it. One made after the search is not covered.
	Covered []string `json:"covered,omitempty"`
}

// Limit is one resource limit and how it was enforced.
type Limit struct {
	// Name is the limit: memory, pids, nofile, fsize, cpu_time, core,
	// tmp_size, inotify_instances, inotify_watches, ...
	Name string `json:"name"`
	// Value is the limit as a number in its unit (bytes, count,
	// seconds) or "none".
	Value    string `json:"value"`
	Enforced string `json:"enforced"` // cgroup, rlimit, sampled, timer, none
	// Source says where the value comes from: "default" for a ceiling
	// every run has unless told otherwise (memory, pids, the inotify
	// ceilings), "policy" for one a flag or profile set; "" for core
	// dumps, which are always off.
	Source string `json:"source,omitempty"`
}

// The sources of a Limit's value.
const (
	SourceDefault = "default"
	SourcePolicy  = "policy"
)

// sourceOf is SourceDefault when the policy leaves v at zero.
func sourceOf(v int64) string {
	if v == 0 {
		return SourceDefault
	}
	return SourcePolicy
}

// classify names how the run ended.
func classify(code int, class ExitClass) *Exit {
	if class != "" {
		return &Exit{Code: code, Class: class}
	}
	if _, ok := exitcode.Signal(code); ok {
		return &Exit{Code: code, Class: ClassSignaled}
	}
	return &Exit{Code: code, Class: ClassExited}
}

// limitReport lists each limit of the plan, how it is enforced and, from
// p, whether it is a default or the policy's. A memory ceiling turned off
// (policy.NoMemoryLimit) is listed as "none".
func limitReport(pl limits.Plan, p policy.Policy) []Limit {
	var out []Limit
	add := func(name string, v int64, how limits.Method, format func(int64) string, source string) {
		if v > 0 {
			out = append(out, Limit{Name: name, Value: format(v), Enforced: string(how), Source: source})
		}
	}
	n := func(v int64) string { return strconv.FormatInt(v, 10) }
	add("memory", pl.Limits.Memory, pl.How.Memory, n, sourceOf(p.Memory))
	if p.Memory == policy.NoMemoryLimit {
		out = append(out, Limit{Name: "memory", Value: "none", Enforced: string(limits.NotLimited), Source: SourcePolicy})
	}
	add("pids", pl.Limits.Pids, pl.How.Pids, n, sourceOf(p.Pids))
	add("cpu_time", int64(pl.Limits.CPUTime), pl.How.CPUTime, func(v int64) string { return time.Duration(v).String() }, SourcePolicy)
	add("nofile", pl.Limits.NoFile, pl.How.NoFile, n, SourcePolicy)
	add("fsize", pl.Limits.FSize, pl.How.FSize, n, SourcePolicy)
	out = append(out, Limit{Name: "core", Value: "0", Enforced: string(pl.How.Core)})
	return out
}

// sampledMemoryNote says what a sampled memory ceiling counts of the
// memory no process maps, "" when memory is not sampled. privateTmpfs
// says whether the sandbox's /tmp and /dev/shm are its own tmpfs
// (bwrap), whose use is counted; elsewhere they are the host's.
func sampledMemoryNote(pl limits.Plan, privateTmpfs bool) string {
	if pl.How.Memory != limits.BySampler {
		return ""
	}
	n := "sampled memory counts resident memory plus every memfd and /dev/shm object a process holds open"
	if privateTmpfs {
		n += " and what the sandbox's /tmp and /dev/shm hold"
	} else {
		n += "; not files in /tmp or /dev/shm that no process holds open (they are the host's)"
	}
	return n + "; not a shared memory object that is only mapped (its resident pages count), one in flight on a socket, nor System V segments no process maps"
}

// inotifyLimits is the report's lines for the inotify ceiling: held by
// the sandbox's user namespace ("userns"), or "none" where the mechanism
// has no user namespace of its own to hold it (c zero).
func inotifyLimits(c limits.Inotify) []Limit {
	if c == (limits.Inotify{}) {
		return []Limit{
			{Name: "inotify_instances", Value: "none", Enforced: "none"},
			{Name: "inotify_watches", Value: "none", Enforced: "none"},
		}
	}
	return []Limit{
		{Name: "inotify_instances", Value: strconv.FormatInt(c.Instances, 10), Enforced: "userns", Source: SourceDefault},
		{Name: "inotify_watches", Value: strconv.FormatInt(c.Watches, 10), Enforced: "userns", Source: SourceDefault},
	}
}

func limitClass(k limits.Kind) ExitClass {
	switch k {
	case limits.MemoryLimit:
		return ClassMemoryLimit
	case limits.PidsLimit:
		return ClassPidsLimit
	case limits.CpuLimit:
		return ClassCPULimit
	case limits.TimedOut:
		return ClassTimedOut
	}
	return ExitClass(k.String())
}

// tmpfsSize is the ceiling ts names for the tmpfs at path, 0 when none.
func tmpfsSize(ts []TmpfsReport, path string) int64 {
	for _, t := range ts {
		if t.Path == path {
			return t.Size
		}
	}
	return 0
}
