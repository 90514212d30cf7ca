// Package plantest holds the plans that every mechanism's translation is
// golden-tested from. Package plan's TestLayoutGolden lays
// them out from fake hosts and writes them (testdata/plans in package
// plan, with -update); the mechanisms' tests read them and translate each
// one: bwrap into its argument stream, gVisor into an OCI spec, Landlock
// (its by-path plans) into a ruleset and the steps it cannot hold,
// Seatbelt (their paths) into a profile. So a
// change of the plan shows in the plan's own goldens and, through the
// same files, in every mechanism's.
//
// It is for tests only: nothing of the binary imports it.
package plantest

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"runtime"
	"testing"

	"github.com/sandbox-run/sandbox-run/bwrap"
	"github.com/sandbox-run/sandbox-run/mount"
)

// Fixture is one plan as a mechanism translates it: the layout of one
// policy shape on one fake host, for one bwrap feature set.
type Fixture struct {
	// Name is the shape and the set ("git-0.8-debian"), the name of every
	// golden made from it.
	Name string
	// Features are the feature set's; BindFD and Size shaped the plan.
	Features bwrap.Features
	// Workdir is the command's directory inside.
	Workdir string
	// AsPid1 says init runs as PID 1 (something is forwarded).
	AsPid1 bool
	// FDBase is the descriptor number of the first bind by descriptor.
	FDBase int
	// Mounts are the layout, the run's later binds (the proxies' sockets,
	// the git hint) and the late mounts, in the order they apply.
	Mounts []mount.Step
	// Writable, ReadOnly, Protected and Watched are the plan's paths
	// (plan.Paths), which a mechanism that matches paths instead of
	// binding them (Seatbelt) translates.
	Writable, ReadOnly, Protected, Watched []string
}

// Dir is the directory the fixtures are kept in.
func Dir() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(file), "..", "testdata", "plans")
}

// Load reads every fixture, in the order of their names; it fails t when
// there are none.
func Load(t testing.TB) []Fixture {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(Dir(), "*.json"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no plan fixtures in %s (go test ./internal/plan -run TestLayoutGolden -update): %v", Dir(), err)
	}
	var out []Fixture
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		var fx Fixture
		if err := json.Unmarshal(b, &fx); err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		out = append(out, fx)
	}
	return out
}

// Encode is a fixture as its file holds it.
func Encode(fx Fixture) ([]byte, error) {
	b, err := json.MarshalIndent(fx, "", "  ")
	return append(b, '\n'), err
}

// Golden compares got with the file golden, after writing got there when
// update is set (a test's -update flag): a fixture's translation, or the
// plan's own rendering, is checked the same way everywhere.
func Golden(t testing.TB, golden string, got []byte, update bool) {
	t.Helper()
	if update {
		if err := os.MkdirAll(filepath.Dir(golden), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(golden, got, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(golden)
	if err != nil {
		t.Fatalf("%v (rerun the test with -update)", err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("differs from %s (rerun with -update to accept, after review of the diff):\n%s", golden, got)
	}
}
