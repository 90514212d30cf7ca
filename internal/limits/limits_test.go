package limits

import (
	"errors"
	"strconv"
	"strings"
	"testing"
	"time"
)

func TestValidate(t *testing.T) {
	for _, tc := range []struct {
		name string
		l    Limits
		ok   bool
	}{
		{"zero", Limits{}, true},
		{"all", Limits{Memory: 64 << 20, Pids: 10, NoFile: 64, FSize: 1, CPUTime: time.Millisecond}, true},
		{"negative memory", Limits{Memory: -1}, false},
		{"tiny memory", Limits{Memory: 4096}, false},
		{"negative pids", Limits{Pids: -1}, false},
		{"negative nofile", Limits{NoFile: -1}, false},
		{"nofile 3", Limits{NoFile: 3}, false},
		{"negative fsize", Limits{FSize: -1}, false},
		{"negative cpu", Limits{CPUTime: -time.Second}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.l.Validate()
			if tc.ok != (err == nil) {
				t.Fatalf("Validate(%+v) = %v, want ok=%v", tc.l, err, tc.ok)
			}
			if err != nil && !errors.Is(err, ErrInvalid) {
				t.Fatalf("error %v does not wrap ErrInvalid", err)
			}
		})
	}
}

func TestKindString(t *testing.T) {
	want := map[Kind]string{None: "none", TimedOut: "timed_out", MemoryLimit: "memory_limit",
		PidsLimit: "pids_limit", CpuLimit: "cpu_limit", Kind(42): "kind(42)"}
	for k, s := range want {
		if k.String() != s {
			t.Errorf("Kind(%d).String() = %q, want %q", int(k), k.String(), s)
		}
	}
}

func TestPlan(t *testing.T) {
	all := Limits{Memory: 256 << 20, Pids: 100, NoFile: 64, FSize: 1 << 20, CPUTime: 1500 * time.Millisecond}
	for _, tc := range []struct {
		name    string
		l       Limits
		env     Env
		how     Enforcement
		cgroup  Limits
		sample  Limits
		rlimits string
	}{
		{
			name: "nothing asked", l: Limits{},
			how:     Enforcement{Memory: "none", Pids: "none", CPUTime: "none", NoFile: "none", FSize: "none", Core: "rlimit"},
			rlimits: "core=0",
		},
		{
			name: "full cgroup", l: all, env: Env{Cgroup: true, CgroupMemory: true, CgroupPids: true, UserNS: true, OverheadTasks: 8},
			how:     Enforcement{Memory: "cgroup", Pids: "cgroup", CPUTime: "cgroup", NoFile: "rlimit", FSize: "rlimit", Core: "rlimit"},
			cgroup:  Limits{Memory: 256 << 20, Pids: 108, CPUTime: 1500 * time.Millisecond},
			rlimits: "core=0,cpu=2:3,nofile=64,fsize=1048576",
		},
		{
			name: "cgroup without controllers, own userns", l: all, env: Env{Cgroup: true, UserNS: true, OverheadTasks: 8},
			how:     Enforcement{Memory: "sampled", Pids: "rlimit", CPUTime: "cgroup", NoFile: "rlimit", FSize: "rlimit", Core: "rlimit"},
			cgroup:  Limits{CPUTime: 1500 * time.Millisecond},
			sample:  Limits{Memory: 256 << 20},
			rlimits: "core=0,data=369098752,nproc=108,cpu=2:3,nofile=64,fsize=1048576",
		},
		{
			name: "no cgroup, no userns (tier 0)", l: all, env: Env{},
			how:     Enforcement{Memory: "sampled", Pids: "sampled", CPUTime: "sampled", NoFile: "rlimit", FSize: "rlimit", Core: "rlimit"},
			sample:  Limits{Memory: 256 << 20, Pids: 100, CPUTime: 1500 * time.Millisecond},
			rlimits: "core=0,data=369098752,cpu=2:3,nofile=64,fsize=1048576",
		},
		{
			name: "host root in a userns is still exempt from nproc", l: Limits{Pids: 5}, env: Env{UserNS: true, HostRoot: true},
			how:     Enforcement{Memory: "none", Pids: "sampled", CPUTime: "none", NoFile: "none", FSize: "none", Core: "rlimit"},
			sample:  Limits{Pids: 5},
			rlimits: "core=0",
		},
		{
			name: "cpu rounds up to a second", l: Limits{CPUTime: time.Millisecond},
			how:     Enforcement{Memory: "none", Pids: "none", CPUTime: "sampled", NoFile: "none", FSize: "none", Core: "rlimit"},
			sample:  Limits{CPUTime: time.Millisecond},
			rlimits: "core=0,cpu=1:2",
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p, err := NewPlan(tc.l, tc.env)
			if err != nil {
				t.Fatal(err)
			}
			if p.How != tc.how {
				t.Errorf("How = %+v\nwant  %+v", p.How, tc.how)
			}
			if p.Cgroup != tc.cgroup {
				t.Errorf("Cgroup = %+v, want %+v", p.Cgroup, tc.cgroup)
			}
			if p.Sample != tc.sample {
				t.Errorf("Sample = %+v, want %+v", p.Sample, tc.sample)
			}
			if got := fmtRlimits(p.Rlimits); got != tc.rlimits {
				t.Errorf("Rlimits = %q, want %q", got, tc.rlimits)
			}
		})
	}
	if _, err := NewPlan(Limits{Pids: -1}, Env{}); !errors.Is(err, ErrInvalid) {
		t.Errorf("NewPlan(invalid) = %v, want ErrInvalid", err)
	}
}

func TestDefaultInterval(t *testing.T) {
	for _, tc := range []struct {
		usage, limit int64
		want         time.Duration
	}{
		{0, 0, SlowInterval}, {0, 6400, IdleInterval}, {99, 6400, IdleInterval},
		{100, 6400, SlowInterval}, {10, 100, SlowInterval}, {49, 100, SlowInterval},
		{50, 100, FastInterval}, {200, 100, FastInterval},
	} {
		if got := DefaultInterval(tc.usage, tc.limit); got != tc.want {
			t.Errorf("DefaultInterval(%d, %d) = %v, want %v", tc.usage, tc.limit, got, tc.want)
		}
	}
}

func TestClassify(t *testing.T) {
	for _, tc := range []struct {
		name string
		e    Evidence
		want Kind
	}{
		{"own exit 3", Evidence{}, None},
		{"own exit despite oom counter", Evidence{OOMKills: 1}, None},
		{"timed out", Evidence{Killed: TimedOut, Signal: sigKILL}, TimedOut},
		{"launcher killed for memory", Evidence{Killed: MemoryLimit, Signal: sigKILL, CPULimit: time.Second, CPUTime: 2 * time.Second}, MemoryLimit},
		{"oom killed", Evidence{Signal: sigKILL, OOMKills: 2}, MemoryLimit},
		{"sigxcpu", Evidence{Signal: sigXCPU, CPULimit: time.Second}, CpuLimit},
		{"sigxcpu without a limit is the command's", Evidence{Signal: sigXCPU}, None},
		{"sigkill at the hard cpu limit", Evidence{Signal: sigKILL, CPULimit: 2 * time.Second, CPUTime: 1970 * time.Millisecond}, CpuLimit},
		{"sigkill far from the cpu budget", Evidence{Signal: sigKILL, CPULimit: 2 * time.Second, CPUTime: time.Second}, None},
		{"sigsegv", Evidence{Signal: 11, CPULimit: time.Second, CPUTime: 5 * time.Second}, None},
	} {
		if got := Classify(tc.e); got != tc.want {
			t.Errorf("%s: Classify(%+v) = %v, want %v", tc.name, tc.e, got, tc.want)
		}
	}
}

func TestEventsKind(t *testing.T) {
	for e, want := range map[Events]Kind{{}: None, {OOMKills: 1}: MemoryLimit, {OOMGroupKills: 1}: MemoryLimit,
		{PidsMax: 3}: PidsLimit, {OOMKills: 1, PidsMax: 3}: MemoryLimit} {
		if got := e.Kind(); got != want {
			t.Errorf("%+v.Kind() = %v, want %v", e, got, want)
		}
	}
}

// fmtRlimits writes rs as name=soft, or name=soft:hard when they differ,
// comma-separated, "inf" for Infinity: short enough for a table.
func fmtRlimits(rs []Rlimit) string {
	var parts []string
	val := func(v uint64) string {
		if v == Infinity {
			return "inf"
		}
		return strconv.FormatUint(v, 10)
	}
	for _, r := range rs {
		p := string(r.Resource) + "=" + val(r.Soft)
		if r.Hard != r.Soft {
			p += ":" + val(r.Hard)
		}
		parts = append(parts, p)
	}
	return strings.Join(parts, ",")
}

// TestValidateNamesTheField: the refusal is typed, so that policy maps it
// to its flag and fix without reading its text.
func TestValidateNamesTheField(t *testing.T) {
	for _, tc := range []struct {
		l          Limits
		field      string
		value, min int64
	}{
		{Limits{Memory: MinMemory - 1}, "memory", MinMemory - 1, MinMemory},
		{Limits{NoFile: 3}, "nofile", 3, MinNoFile},
		{Limits{Pids: -2}, "pids", -2, 0},
		{Limits{CPUTime: -1}, "cpu_time", -1, 0},
	} {
		var ie *InvalidError
		if err := tc.l.Validate(); !errors.As(err, &ie) || !errors.Is(err, ErrInvalid) || ie.Field != tc.field || ie.Value != tc.value || ie.Min != tc.min {
			t.Errorf("Validate(%+v) = %#v, want field %s value %d min %d", tc.l, err, tc.field, tc.value, tc.min)
		}
	}
	if err := (Limits{Memory: MinMemory, NoFile: MinNoFile}).Validate(); err != nil {
		t.Errorf("limits at the floors refused: %v", err)
	}
}
