package check

import (
	"context"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"time"
)

// imagesItem says whether run --image and mcp --image can run here: tier 2
// (t2, the gVisor item) must hold, and podman must list this user's image
// storage (rootless podman keeps one per user). Its summary starts with
// isolation.gvisor=ready, or names what is missing; like tier 2 its
// absence is a warning.
func imagesItem(ctx context.Context, t2 Item) Item {
	start := time.Now()
	it := Item{ID: "images", Category: "gvisor"}
	defer func() { it.DurationMS = time.Since(start).Milliseconds() }()
	uid := strconv.Itoa(os.Getuid())
	podman, err := exec.LookPath("podman")
	switch {
	case t2.Status != StatusOK:
		it.Status, it.Summary, it.Remediation = StatusWarn, "isolation.gvisor=unavailable: container images (--image) run under gVisor, and tier 2 does not run here", t2.Remediation
		if it.Remediation == "" {
			it.Remediation = "see the tier2 line"
		}
		return it
	case err != nil:
		it.Status, it.Summary, it.Remediation = StatusWarn, "isolation.gvisor=unavailable: no podman on PATH, which keeps the images --image runs", "apt-get install -y podman"
		return it
	}
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	c := exec.CommandContext(ctx, podman, "image", "ls", "--quiet")
	out, err := c.CombinedOutput()
	if err != nil {
		it.Status, it.Summary = StatusWarn, "isolation.gvisor=unavailable: podman cannot list the image storage of uid "+uid+": "+lastLine(string(out))
		it.Remediation = "make podman work for this user (rootless: subuid/subgid ranges in /etc/subuid and /etc/subgid, uidmap installed)"
		return it
	}
	n := len(strings.Fields(string(out)))
	it.Status = StatusOK
	it.Summary = "isolation.gvisor=ready: run --image and mcp --image run podman's images (uid " + uid + "'s storage, " + strconv.Itoa(n) + " images) under gVisor; nothing is pulled without --pull"
	return it
}

func lastLine(s string) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	return strings.TrimSpace(lines[len(lines)-1])
}
