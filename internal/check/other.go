//go:build !linux && !darwin

package check

import (
	"context"
	"fmt"
	"runtime"
)

func environment(ctx context.Context, binary string) ([]Item, string, bool) {
	return []Item{{ID: "platform", Category: "host", Status: StatusFail,
		Summary:     fmt.Sprintf("%s/%s: check has no probes for this platform yet", runtime.GOOS, runtime.GOARCH),
		Remediation: "run sandbox-run on Linux with bubblewrap for tier 1"}}, "none", false
}
