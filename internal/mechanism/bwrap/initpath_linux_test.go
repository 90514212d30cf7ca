package bwrap

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/sandbox-run/sandbox-run/internal/mechanism"
)

// initPath finds a Beside init next to this executable, and leaves a
// Path that is set, and the zero value, as they are.
func TestInitPath(t *testing.T) {
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	if got := initPath(mechanism.InitBinary{Beside: "sandbox-run-init", BuildID: "b"}); got.Path != filepath.Join(filepath.Dir(exe), "sandbox-run-init") || got.BuildID != "b" {
		t.Errorf("Beside: %+v", got)
	}
	if got := initPath(mechanism.InitBinary{Path: "/opt/init", Beside: "x"}); got.Path != "/opt/init" {
		t.Errorf("Path set: %+v", got)
	}
	if got := initPath(mechanism.InitBinary{}); got.Path != "" {
		t.Errorf("zero value: %+v", got)
	}
}
