package hostnet

import (
	"os"
	"testing"

	"github.com/sandbox-run/sandbox-run/internal/sandboxtest"
)

// helpers maps a helper mode of the test binary to its function, which
// returns the exit status; it runs in a child process (in a pid namespace
// of its own, see rundir_ns_linux_test.go), never in the test process. The
// Linux test files fill it from init (a constant table).
var helpers = map[string]func() int{}

func TestMain(m *testing.M) {
	sandboxtest.RunHelper(helpers)
	os.Exit(m.Run())
}
