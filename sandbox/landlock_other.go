//go:build !linux

package sandbox

import (
	"fmt"
	"os"

	"github.com/sandbox-run/sandbox-run/internal/mechanism"
	"github.com/sandbox-run/sandbox-run/policy"
)

// landlockArg is the landlock shim's hidden mode; it exists only on Linux.
const landlockArg = "__sandbox-landlock"

func landlockMechanism(policy.Policy, []string, mechanism.Config) (mechanism.Mechanism, error) {
	return nil, fmt.Errorf("sandbox: landlock exists only on Linux: %w", ErrUnsupported)
}

func landlockMain() int {
	os.Stderr.WriteString("sandbox-run: landlock: exists only on Linux\n")
	return ExitSetup
}
