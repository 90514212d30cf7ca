package hostnet

import (
	"fmt"
	"os"
	"testing"
)

// helperEnv selects a helper mode of the test binary: TestMain runs the
// named helper instead of the tests, in a child process (in a pid
// namespace of its own, see rundir_ns_linux_test.go).
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
	os.Exit(m.Run())
}
