package seatbelt

import (
	"flag"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sandbox-run/sandbox-run/internal/plan"
	"github.com/sandbox-run/sandbox-run/internal/plan/plantest"
	sbpl "github.com/sandbox-run/sandbox-run/seatbelt"
)

var update = flag.Bool("update", false, "rewrite testdata/translate/*.golden from the plan fixtures")

// goldenOptions are the run's facts besides the plan in every golden: a
// fixed tag, a private TMPDIR and both loopback ports.
var goldenOptions = sbpl.Options{Tag: "sbx-golden-tag", TmpDir: "/private/var/folders/xy/T/sandbox-run-tmp-RUN", ProxyPort: 41000, LLMPort: 41001}

// TestTranslateGolden: the paths of every by-path plan of package
// plantest, the plans bwrap's arguments, gVisor's spec and Landlock's
// ruleset are tested from, become the Seatbelt profile the mechanism
// renders (grants), in testdata/translate (go test
// ./internal/mechanism/seatbelt -run TestTranslateGolden -update to
// rewrite, then review each diff). Control: a plan with protected paths
// must deny them, and every writable dir must be granted, so that a
// translation that dropped either fails here as well as in the golden.
func TestTranslateGolden(t *testing.T) {
	n := 0
	for _, fx := range plantest.Load(t) {
		if !strings.HasSuffix(fx.Name, "-bypath") {
			continue // the same paths as the shape's other feature sets
		}
		n++
		t.Run(fx.Name, func(t *testing.T) {
			ps := plan.Paths{Writable: fx.Writable, ReadOnly: fx.ReadOnly, Protected: fx.Protected, Watched: fx.Watched}
			prof, err := sbpl.RenderGrants(grants(ps, false), goldenOptions)
			if err != nil {
				t.Fatal(err)
			}
			text := prof.String()
			for _, w := range fx.Writable {
				if !strings.Contains(text, `(allow file-write* (require-all (subpath "`+sbpl.Canonical(w)+`")`) {
					t.Errorf("writable dir %s is not granted", w)
				}
			}
			if len(protected(ps)) > 0 && !strings.Contains(text, "(deny file-write*") {
				t.Errorf("the plan holds %d protected paths and the profile denies no write", len(protected(ps)))
			}
			plantest.Golden(t, filepath.Join("testdata", "translate", fx.Name+".sb"), []byte(text), *update)
		})
	}
	if n == 0 {
		t.Fatal("no by-path plan among the fixtures")
	}
}
