package check

import (
	"context"
	"strings"
	"time"
)

// tier2Item sets up one tier-2 sandbox (--sandbox gvisor) with the binary
// under test and says whether tier 2 is available here, and if not why.
// Tier 2 is never chosen by auto, so its absence is a warning, never a
// failure of tier 1.
func tier2Item(ctx context.Context, binary string) Item {
	start := time.Now()
	it := Item{ID: "tier2", Category: "gvisor"}
	defer func() { it.DurationMS = time.Since(start).Milliseconds() }()
	r, summary, fix := sandboxReport(ctx, binary, "a tier-2 sandbox", "--sandbox", "gvisor")
	switch {
	case r == nil:
		it.Status, it.Summary, it.Remediation = StatusWarn, "tier 2 (gvisor) unavailable: "+summary, fix
	case r.Tier != 2 || r.Gvisor == nil || r.Readback == nil || r.Readback.Kernel == nil || !strings.Contains(r.Readback.Kernel.Dmesg, "gVisor"):
		it.Status, it.Summary = StatusFail, "tier 2 (gvisor) ran, but the kernel read back from inside is not gVisor's"
		it.Remediation = "report this as a bug in sandbox-run with the output of check --json"
	default:
		it.Status = StatusOK
		mode := "as root"
		if r.Gvisor.Rootless {
			mode = "rootless"
		}
		it.Summary = "tier 2 (gvisor) available with --sandbox gvisor: runsc " + r.Gvisor.Version + ", platform " + r.Gvisor.Platform + ", " + mode
		it.Details = []string{"kernel read back: " + r.Readback.Kernel.ProcVersion, "dmesg: " + r.Readback.Kernel.Dmesg}
	}
	return it
}
