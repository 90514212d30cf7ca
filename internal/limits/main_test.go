package limits

import (
	"os"
	"testing"

	"github.com/sandbox-run/sandbox-run/internal/sandboxtest"
)

// helpers maps a helper mode of the test binary to its function, which
// returns the exit status. Helpers run in child processes only; the test
// process itself is never limited. The Linux test files fill it from init
// (a constant table).
var helpers = map[string]func() int{}

// TestMain runs a helper (sandboxtest.RunHelper), or the tests, failing
// the run if they leaked a descriptor (sandboxtest.RunLeakChecked).
func TestMain(m *testing.M) {
	sandboxtest.RunHelper(helpers)
	os.Exit(sandboxtest.RunLeakChecked(m))
}
