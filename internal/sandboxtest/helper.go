package sandboxtest

import (
	"fmt"
	"os"
)

// HelperEnv names the helper mode a test binary is re-executed in. Set in a
// child's environment, it makes the child's TestMain run that helper
// (RunHelper, ServeTestHost) instead of the tests.
const HelperEnv = "SANDBOX_RUN_TEST_HELPER"

// RunHelper belongs first in the TestMain of a package whose test binary
// is re-executed as a helper. With HelperEnv unset or empty it returns, and
// the tests run. Otherwise it never returns: it runs helpers[mode] and exits
// with the status that returns, or exits 2 after naming the mode on stderr
// when helpers has none of that name, so a child never runs the tests
// instead of its helper.
func RunHelper(helpers map[string]func() int) {
	mode := os.Getenv(HelperEnv)
	if mode == "" {
		return
	}
	h, ok := helpers[mode]
	if !ok {
		fmt.Fprintf(os.Stderr, "unknown helper %q\n", mode)
		os.Exit(2)
	}
	os.Exit(h())
}
