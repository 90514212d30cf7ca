package initproc

import (
	"reflect"
	"testing"

	"github.com/sandbox-run/sandbox-run/internal/limits"
)

func TestSplitRlimits(t *testing.T) {
	core := rl(limits.Core, 0, 0)
	for _, c := range []struct {
		name  string
		rs    []limits.Rlimit
		nproc uint64
		shim  bool
	}{
		{"none", nil, 0, false},
		{"core only", []limits.Rlimit{core}, 0, false},
		{"core and nproc", []limits.Rlimit{core, rl(limits.NProc, 50, 50)}, 50, false},
		{"nproc soft below hard", []limits.Rlimit{core, rl(limits.NProc, 50, 60)}, 0, true},
		// Not a ceiling the shell line is written for (Validate refuses
		// it anyway): the shim sets whatever it is, exactly.
		{"nproc zero", []limits.Rlimit{rl(limits.NProc, 0, 0)}, 0, true},
		{"nproc unlimited", []limits.Rlimit{rl(limits.NProc, limits.Infinity, limits.Infinity)}, 0, true},
		{"nofile", []limits.Rlimit{core, rl(limits.NoFile, 64, 64)}, 0, true},
		{"nproc and nofile", []limits.Rlimit{rl(limits.NProc, 50, 50), rl(limits.NoFile, 64, 64)}, 50, true},
		{"core not zero", []limits.Rlimit{rl(limits.Core, 1, 1)}, 0, true},
	} {
		nproc, shim := SplitRlimits(c.rs)
		if nproc != c.nproc || shim != c.shim {
			t.Errorf("%s: SplitRlimits = %d, %v; want %d, %v", c.name, nproc, shim, c.nproc, c.shim)
		}
	}
}

func TestExecPlan(t *testing.T) {
	argv := []string{"env", "-i", "a b"}
	for _, c := range []struct {
		name     string
		rs       []limits.Rlimit
		shOK     bool
		broker   bool
		wantExe  string
		wantArgs []string
	}{
		{"no rlimit", nil, true, false, "/usr/bin/env", argv},
		{"core only: inherited from init", []limits.Rlimit{rl(limits.Core, 0, 0)}, true, false, "/usr/bin/env", argv},
		{"process ceiling: the shell", []limits.Rlimit{rl(limits.Core, 0, 0), rl(limits.NProc, 50, 50)}, true, false, "/bin/sh",
			[]string{"/bin/sh", "-c", ShellNProc(50, 2) + `exec "$@"`, "env", "/usr/bin/env", "-i", "a b"}},
		{"process ceiling, no /bin/sh: the exec shim", []limits.Rlimit{rl(limits.NProc, 50, 50)}, false, false, "/proc/self/exe",
			[]string{"sandbox-run", ExecArg, "nproc=50", "/usr/bin/env", "env", "-i", "a b"}},
		{"no rlimit, no /bin/sh", nil, false, false, "/usr/bin/env", argv},
		{"anything else: the exec shim", []limits.Rlimit{rl(limits.NProc, 50, 50), rl(limits.NoFile, 64, 64)}, true, false, "/proc/self/exe",
			[]string{"sandbox-run", ExecArg, "nproc=50,nofile=64", "/usr/bin/env", "env", "-i", "a b"}},
		{"the connect broker: the exec shim", nil, true, true, "/proc/self/exe",
			[]string{"sandbox-run", ExecArg, BrokerMark, "", "/usr/bin/env", "env", "-i", "a b"}},
		{"the broker and a process ceiling", []limits.Rlimit{rl(limits.NProc, 50, 50)}, true, true, "/proc/self/exe",
			[]string{"sandbox-run", ExecArg, BrokerMark, "nproc=50", "/usr/bin/env", "env", "-i", "a b"}},
	} {
		exe, args := execPlan(c.rs, "/usr/bin/env", argv, c.shOK, c.broker)
		if exe != c.wantExe || !reflect.DeepEqual(args, c.wantArgs) {
			t.Errorf("%s: execPlan = %s %q, want %s %q", c.name, exe, args, c.wantExe, c.wantArgs)
		}
	}
}
