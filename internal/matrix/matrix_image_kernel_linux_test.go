package matrix

import (
	"context"
	"os"
	"testing"
	"time"

	"github.com/sandbox-run/sandbox-run/internal/sandboxtest"
)

// TestEscapeMatrixGvisorImage runs the gvisor column again with each
// confined attempt in a container image's tree (run --image, issue 39):
// the static busybox image sandboxtest builds with podman import, the
// probe bound in by --read as in every row. The same expectations hold:
// the image changes the root, not the boundary.
func TestEscapeMatrixGvisorImage(t *testing.T) {
	sandboxtest.Runsc(t)
	img := sandboxtest.BusyboxImage(t, nil)
	cache := t.TempDir()
	os.Chmod(cache, 0o700)
	t.Setenv("XDG_CACHE_HOME", cache)
	cases, err := Load()
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 240*time.Second)
	defer cancel()
	start := time.Now()
	results, err := Run(ctx, cases, RunOptions{Binary: bin, Mechanism: "gvisor", Image: img.Ref, Parallel: 3, CaseTimeout: 40 * time.Second})
	if err != nil {
		sandboxtest.Unavailable(t, "the escape matrix's canaries", err.Error())
	}
	judgeColumn(t, "gvisor", results, start)
}
