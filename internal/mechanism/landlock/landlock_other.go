//go:build !linux

package landlock

import (
	"fmt"
	"os"

	"github.com/sandbox-run/sandbox-run/internal/exitcode"
	"github.com/sandbox-run/sandbox-run/internal/mechanism"
	"github.com/sandbox-run/sandbox-run/policy"
)

// Arg is the landlock shim's hidden mode; it exists only on Linux.
const Arg = "__sandbox-landlock"

func New(policy.Policy, []string, mechanism.Config) (mechanism.Mechanism, error) {
	return nil, fmt.Errorf("sandbox: landlock exists only on Linux: %w", mechanism.ErrUnsupported)
}

func Main() int {
	os.Stderr.WriteString("sandbox-run: landlock: exists only on Linux\n")
	return exitcode.Setup
}
