package gvisor

import (
	"encoding/json"
	"flag"
	"path/filepath"
	"testing"

	oci "github.com/sandbox-run/sandbox-run/gvisor"
	"github.com/sandbox-run/sandbox-run/internal/plan/plantest"
	"github.com/sandbox-run/sandbox-run/policy"
)

var update = flag.Bool("update", false, "rewrite testdata/translate/*.golden from the plan fixtures")

// TestTranslateGolden: every by-path plan of package plantest (gVisor has
// no bind by descriptor), the same plans bwrap's arguments are tested
// from, becomes the OCI bundle in testdata/translate (go test
// ./internal/mechanism/gvisor -run TestTranslateGolden -update to
// rewrite, then review each diff). The fixtures' host is not this one:
// every source counts as a directory, and package gvisor's own tests
// cover file binds.
func TestTranslateGolden(t *testing.T) {
	n := 0
	for _, fx := range plantest.Load(t) {
		if fx.Features.BindFD {
			continue
		}
		n++
		t.Run(fx.Name, func(t *testing.T) {
			g := &gvRun{p: policy.Policy{Workdir: fx.Workdir}, uid: 65534, gid: 65534, bundle: "/run/bundle"}
			in := g.specInput(fx.Mounts, map[string]bool{}, []string{"HOME=" + fx.Workdir, "PATH=/usr/bin:/bin"},
				[]string{"--", "sh"}, []oci.Rlimit{{Type: "RLIMIT_NOFILE", Hard: 4096, Soft: 4096}}, false)
			b, err := oci.Render(in)
			if err != nil {
				t.Fatal(err)
			}
			got, err := json.MarshalIndent(b, "", "  ")
			if err != nil {
				t.Fatal(err)
			}
			got = append(got, '\n')
			plantest.Golden(t, filepath.Join("testdata", "translate", fx.Name+".json"), got, *update)
		})
	}
	if n == 0 {
		t.Fatal("no by-path plan among the fixtures")
	}
}
