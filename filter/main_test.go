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

// helpers is the registry of helper modes, filled only by init functions in
// the per-OS test files and read-only afterwards. Helper modes run only in
// the test binary re-executed as a probe (inside bwrap), never in the test
// process itself: they make denied calls or die of SIGSYS.
var helpers = map[string]func() int{}

// usedHelpers records which helpers the parent started in this run.
var usedHelpers sync.Map

// TestMain runs a helper (sandboxtest.RunHelper), or the tests, failing the
// run if they leaked a descriptor (sandboxtest.RunLeakChecked: a leaked fd,
// a seccomp pipe say, is an escape path in the launcher, and the tests must
// not leak either) or, but in a fuzzing run, if a helper went unused.
func TestMain(m *testing.M) {
	sandboxtest.RunHelper(helpers)
	if code := sandboxtest.RunLeakChecked(m); code != 0 || sandboxtest.Fuzzing() {
		os.Exit(code)
	}
	if unused := unusedHelpers(); len(unused) > 0 {
		fmt.Fprintf(os.Stderr, "FAIL: helpers never used: %v\n", unused)
		os.Exit(1)
	}
	os.Exit(0)
}

// unusedHelpers returns, sorted, the helpers no test started, when every
// test ran and none could skip (no -run or -short, SANDBOX_REQUIRE=1):
// then a helper no test starts is a check that silently stopped running.
// Otherwise it returns nil.
func unusedHelpers() []string {
	if f := flag.Lookup("test.run"); f == nil || f.Value.String() != "" || testing.Short() || !sandboxtest.Required() {
		return nil
	}
	var unused []string
	for name := range helpers {
		if _, ok := usedHelpers.Load(name); !ok {
			unused = append(unused, name)
		}
	}
	sort.Strings(unused)
	return unused
}
