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
		Allow: sorted(r.AllowHosts), HTTP: tlsRules(r.TLS), Writable: sorted(r.Writable), ReadOnly: sorted(r.ReadOnly),
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

// tlsRules is the TLS rules in force, sorted; nil-safe, for the digest.
func tlsRules(t *TLSReport) []string {
	if t == nil {
		return nil
	}
	return sorted(t.Rules)
}
