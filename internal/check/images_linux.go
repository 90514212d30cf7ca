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
	f := imageFacts{t2: t2, uid: os.Getuid()}
	podman, err := exec.LookPath("podman")
	f.podman = err == nil
	if f.podman && t2.Status == StatusOK {
		ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		defer cancel()
		out, err := exec.CommandContext(ctx, podman, "image", "ls", "--quiet").CombinedOutput()
		f.list, f.listErr = string(out), err
	}
	it := imagesVerdict(f)
	it.DurationMS = time.Since(start).Milliseconds()
	return it
}

// imageFacts are what imagesVerdict decides on: the tier-2 item, whether
// podman is on PATH, and what `podman image ls --quiet` printed (and
// whether it failed) for uid.
type imageFacts struct {
	t2      Item
	podman  bool
	list    string
	listErr error
	uid     int
}

// imagesVerdict is the images item for the facts f, without touching the
// host: tier 2 first (images run under gVisor), then podman, then its
// storage.
func imagesVerdict(f imageFacts) Item {
	it := Item{ID: "images", Category: "gvisor"}
	uid := strconv.Itoa(f.uid)
	switch {
	case f.t2.Status != StatusOK:
		it.Status, it.Summary, it.Remediation = StatusWarn, "isolation.gvisor=unavailable: container images (--image) run under gVisor, and tier 2 does not run here", f.t2.Remediation
		if it.Remediation == "" {
			it.Remediation = "see the tier2 line"
		}
	case !f.podman:
		it.Status, it.Summary, it.Remediation = StatusWarn, "isolation.gvisor=unavailable: no podman on PATH, which keeps the images --image runs", "apt-get install -y podman"
	case f.listErr != nil:
		it.Status, it.Summary = StatusWarn, "isolation.gvisor=unavailable: podman cannot list the image storage of uid "+uid+": "+lastLine(f.list)
		it.Remediation = "make podman work for this user (rootless: subuid/subgid ranges in /etc/subuid and /etc/subgid, uidmap installed)"
	default:
		it.Status = StatusOK
		it.Summary = "isolation.gvisor=ready: run --image and mcp --image run podman's images (uid " + uid + "'s storage, " + strconv.Itoa(len(strings.Fields(f.list))) + " images) under gVisor; nothing is pulled without --pull"
	}
	return it
}

func lastLine(s string) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	return strings.TrimSpace(lines[len(lines)-1])
}
