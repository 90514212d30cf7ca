package e2e

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/sandbox-run/sandbox-run/internal/sandboxtest"
)

// TestReportSchemaEveryMechanism validates a real report of each Linux
// mechanism against docs/report.schema.json, the contract harnesses parse
// reports by. The control: the same report with a field the schema does
// not know, and without one it requires, is rejected, so a pass means the
// schema was applied.
func TestReportSchemaEveryMechanism(t *testing.T) {
	c := jsonschema.NewCompiler()
	sch, err := c.Compile("../docs/report.schema.json")
	if err != nil {
		t.Fatal(err)
	}
	for _, mech := range []struct {
		name  string
		need  func(t *testing.T)
		extra []string
	}{
		{"bwrap", needBwrap, nil},
		{"landlock", func(t *testing.T) { sandboxtest.Landlock(t, 1) }, nil},
		{"gvisor", func(t *testing.T) { sandboxtest.Runsc(t) }, nil},
		{"off", func(*testing.T) {}, nil},
	} {
		t.Run(mech.name, func(t *testing.T) {
			mech.need(t)
			w := sandboxtest.WorkDir(t)
			path := filepath.Join(sandboxtest.WorkDir(t), "r.json")
			args := append([]string{"run", "--sandbox", mech.name, "--workdir", w, "--report", path,
				"--allow-host", "example.com", "--env", "A=1"}, mech.extra...)
			r := run(t, "", append(args, "--", "sh", "-c", "echo hi >f; exit 3")...)
			if r.code != 3 {
				t.Fatalf("exit %d, want 3: %s", r.code, r.stderr)
			}
			b, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(b))
			if err != nil {
				t.Fatal(err)
			}
			if err := sch.Validate(doc); err != nil {
				t.Fatalf("the %s report does not validate: %v\n%s", mech.name, err, b)
			}
			var m map[string]any
			if err := json.Unmarshal(b, &m); err != nil {
				t.Fatal(err)
			}
			if m["schema"] != "sandbox-run/report/v1" || m["mechanism"] == nil {
				t.Fatalf("schema %v, mechanism %v", m["schema"], m["mechanism"])
			}
			m["unknown_field"] = true
			if sch.Validate(m) == nil {
				t.Error("control: a report with an unknown field validates: the schema allows anything")
			}
			delete(m, "unknown_field")
			delete(m, "run_id")
			if sch.Validate(m) == nil {
				t.Error("control: a report without run_id validates: the schema requires nothing")
			}
		})
	}
}
