package limits

import (
	"flag"
	"fmt"
	"os"
	"testing"
)

// helperEnv selects a helper mode of the test binary: TestMain runs the
// named helper instead of the tests. Helpers run in child processes only;
// the test process itself is never limited.
const helperEnv = "SANDBOX_RUN_TEST_HELPER"

// helpers maps a mode to its function, which returns the exit status. The
// Linux test files fill it from init (a constant table).
var helpers = map[string]func() int{}

func TestMain(m *testing.M) {
	if mode := os.Getenv(helperEnv); mode != "" {
		h, ok := helpers[mode]
		if !ok {
			fmt.Fprintf(os.Stderr, "unknown helper %q\n", mode)
			os.Exit(2)
		}
		os.Exit(h())
	}
	before := openFDs()
	code := m.Run()
	// The fuzzing engine's coordinator holds the corpus cache and its
	// workers' shared memory open across the run, and closes them on its
	// own schedule: a descriptor count then judges the engine, not the
	// tests. The leak check is for the tests' own runs.
	if f := flag.Lookup("test.fuzz"); f != nil && f.Value.String() != "" {
		os.Exit(code)
	}
	if code == 0 && before != nil {
		for fd, target := range openFDs() {
			if _, ok := before[fd]; !ok {
				fmt.Fprintf(os.Stderr, "limits: tests leaked descriptor %s -> %s\n", fd, target)
				code = 99
			}
		}
	}
	os.Exit(code)
}

// openFDs returns the process's descriptors and what they point at, but
// the runtime's own poller (created on first use), nil where /proc is
// unavailable.
func openFDs() map[string]string {
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		return nil
	}
	m := map[string]string{}
	for _, e := range ents {
		l, err := os.Readlink("/proc/self/fd/" + e.Name())
		if err != nil || l == "anon_inode:[eventpoll]" || l == "anon_inode:[eventfd]" {
			continue // gone (the directory's own descriptor), or the poller
		}
		m[e.Name()] = l
	}
	return m
}
