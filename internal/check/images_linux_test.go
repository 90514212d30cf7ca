package check

import (
	"errors"
	"strings"
	"testing"
)

// TestImagesVerdict: the images line is ready only when tier 2 holds,
// podman is on PATH and lists this user's storage; each missing fact
// turns it into a warning that names the fix.
func TestImagesVerdict(t *testing.T) {
	ok := Item{ID: "tier2", Status: StatusOK}
	noT2 := Item{ID: "tier2", Status: StatusWarn, Remediation: "apt-get install -y runsc"}
	for _, tc := range []struct {
		name    string
		f       imageFacts
		status  string
		summary string
		fix     string
	}{
		{"ready", imageFacts{t2: ok, podman: true, list: "abc\ndef\n", uid: 0}, StatusOK, "isolation.gvisor=ready: run --image and mcp --image run podman's images (uid 0's storage, 2 images)", ""},
		{"ready, empty storage", imageFacts{t2: ok, podman: true, uid: 1000}, StatusOK, "(uid 1000's storage, 0 images)", ""},
		{"no runsc", imageFacts{t2: noT2, podman: true, list: "abc"}, StatusWarn, "isolation.gvisor=unavailable: container images (--image) run under gVisor, and tier 2 does not run here", "apt-get install -y runsc"},
		{"tier 2 without a fix", imageFacts{t2: Item{Status: StatusFail}, podman: true}, StatusWarn, "tier 2 does not run here", "see the tier2 line"},
		{"no podman", imageFacts{t2: ok}, StatusWarn, "isolation.gvisor=unavailable: no podman on PATH", "apt-get install -y podman"},
		{"storage unusable", imageFacts{t2: ok, podman: true, list: "WARN x\nError: cannot set up namespace\n", listErr: errors.New("exit status 125"), uid: 1000}, StatusWarn, "podman cannot list the image storage of uid 1000: Error: cannot set up namespace", "/etc/subuid"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			it := imagesVerdict(tc.f)
			if it.ID != "images" || it.Status != tc.status || !strings.Contains(it.Summary, tc.summary) || !strings.Contains(it.Remediation, tc.fix) {
				t.Errorf("got %+v, want status %v, summary with %q, fix with %q", it, tc.status, tc.summary, tc.fix)
			}
			if tc.status != StatusOK && strings.Contains(it.Summary, "=ready") {
				t.Errorf("a missing fact still says ready: %q", it.Summary)
			}
			if tc.status == StatusOK && it.Remediation != "" {
				t.Errorf("ready with a fix: %q", it.Remediation)
			}
		})
	}
}
