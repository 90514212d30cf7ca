package filter

import (
	"flag"
	"fmt"
	"os"
	"sort"
	"sync"
	"testing"

	"github.com/sandbox-run/sandbox-run/internal/sandboxtest"
)

var update = flag.Bool("update", false, "rewrite golden files and the generated section of docs/seccomp.md")

// helperEnv names the helper mode when the test binary is re-executed as a
// probe (inside bwrap). Helper modes never run in the test process itself:
// they make denied calls or die of SIGSYS.
const helperEnv = "SANDBOX_RUN_TEST_HELPER"

// helpers is the registry of helper modes, filled only by init functions in
// the per-OS test files and read-only afterwards.
var helpers = map[string]func() int{}

// usedHelpers records which helpers the parent started in this run.
var usedHelpers sync.Map

func TestMain(m *testing.M) {
	if name := os.Getenv(helperEnv); name != "" {
		f, ok := helpers[name]
		if !ok {
			fmt.Fprintf(os.Stderr, "unknown helper %q\n", name)
			os.Exit(2)
		}
		os.Exit(f())
	}
	flag.Parse()
	// Start the runtime's poller (epoll and eventfd descriptors) before
	// counting, so that only descriptors the tests leak are counted.
	if r, w, err := os.Pipe(); err == nil {
		r.Close()
		w.Close()
	}
	fdsBefore := openFDs()
	code := m.Run()
	// The fuzzing engine's coordinator holds the corpus cache and its
	// workers' shared memory open across the run, and closes them on its
	// own schedule: a descriptor count then judges the engine, not the
	// tests. The leak check is for the tests' own runs.
	if f := flag.Lookup("test.fuzz"); f != nil && f.Value.String() != "" {
		os.Exit(code)
	}
	if code != 0 {
		os.Exit(code)
	}
	// A leaked fd (a seccomp pipe, say) is an escape path in the launcher;
	// the tests must not leak either.
	if after := openFDs(); fdsBefore >= 0 && after > fdsBefore {
		fmt.Fprintf(os.Stderr, "FAIL: %d open fds after the tests, %d before\n", after, fdsBefore)
		os.Exit(1)
	}
	// When every test ran and none could skip (SANDBOX_REQUIRE=1), every
	// helper must have been used: a helper no test starts is a check that
	// silently stopped running.
	if f := flag.Lookup("test.run"); f != nil && f.Value.String() == "" && !testing.Short() && sandboxtest.Required() {
		var unused []string
		for name := range helpers {
			if _, ok := usedHelpers.Load(name); !ok {
				unused = append(unused, name)
			}
		}
		if len(unused) > 0 {
			sort.Strings(unused)
			fmt.Fprintf(os.Stderr, "FAIL: helpers never used: %v\n", unused)
			os.Exit(1)
		}
	}
	os.Exit(0)
}

// openFDs counts this process's open descriptors, or -1 where /proc/self/fd
// does not exist.
func openFDs() int {
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		return -1
	}
	return len(ents)
}
