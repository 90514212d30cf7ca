package cli

import (
	"os"

	"github.com/sandbox-run/sandbox-run/devenv"
)

// otherUID is devenv.Reachable when the command runs as another uid than
// sandbox-run (as root it runs as --user or 65534), nil otherwise.
func otherUID() func(string) bool {
	if os.Geteuid() == 0 {
		return devenv.Reachable
	}
	return nil
}
