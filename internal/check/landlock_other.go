//go:build !linux

package check

import (
	"context"
	"fmt"
	"runtime"
)

// landlockEnvironment: Landlock exists only on Linux.
func landlockEnvironment(context.Context, string) ([]Item, string, bool) {
	return []Item{{ID: "landlock", Category: "sandbox", Status: StatusFail,
		Summary:     fmt.Sprintf("--sandbox landlock exists only on Linux, not on %s", runtime.GOOS),
		Remediation: "run check without --sandbox"}}, "landlock", false
}
