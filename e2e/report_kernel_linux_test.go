package e2e

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sandbox-run/sandbox-run/internal/sandboxtest"
)

type reportJSON struct {
	RunID       string `json:"run_id"`
	Tier        int    `json:"tier"`
	Mechanism   string `json:"mechanism"`
	Protections []struct {
		Name       string `json:"name"`
		Configured bool   `json:"configured"`
		Verified   *bool  `json:"verified"`
	} `json:"protections"`
	Exit struct {
		Code  int    `json:"code"`
		Class string `json:"class"`
	} `json:"exit"`
	Digest string `json:"environment_digest"`
	Limits []struct {
		Name     string `json:"name"`
		Value    string `json:"value"`
		Enforced string `json:"enforced"`
	} `json:"limits"`
}

func runReport(t *testing.T, w string, extra []string, script string) (reportJSON, result) {
	t.Helper()
	rep := filepath.Join(sandboxtest.WorkDir(t), "r.json")
	args := append(append([]string{"run", "--workdir", w, "--report", rep}, extra...), "--", "sh", "-c", script)
	r := run(t, "", args...)
	var out reportJSON
	b, err := os.ReadFile(rep)
	if err != nil {
		t.Fatalf("no report: %v (%s)", err, r.stderr)
	}
	if err := json.Unmarshal(b, &out); err != nil {
		t.Fatal(err)
	}
	return out, r
}

// TestReportMatchesInside: what the report verified agrees with what the
// command itself reads from /proc/self/status.
func TestReportMatchesInside(t *testing.T) {
	needBwrap(t)
	w := sandboxtest.WorkDir(t)
	rep, r := runReport(t, w, nil, `grep -E '^(NoNewPrivs|Seccomp|CapEff):' /proc/self/status; exit 3`)
	inside := r.stdout
	want := map[string]bool{
		"no_new_privs":         strings.Contains(inside, "NoNewPrivs:\t1"),
		"seccomp":              strings.Contains(inside, "Seccomp:\t2"),
		"capabilities_dropped": strings.Contains(inside, "CapEff:\t0000000000000000"),
	}
	for _, p := range rep.Protections {
		if w, ok := want[p.Name]; ok {
			if p.Verified == nil || *p.Verified != w {
				t.Errorf("%s: report verified=%v, the command read %v", p.Name, p.Verified, w)
			}
		}
	}
	if rep.Exit.Code != 3 || rep.Exit.Class != "exited" || r.code != 3 {
		t.Errorf("exit 3 reported as %+v (process exit %d)", rep.Exit, r.code)
	}
	if rep.Tier != 1 || rep.Mechanism != "bwrap" || rep.RunID == "" {
		t.Errorf("report header: %+v", rep)
	}
}

// TestEnvironmentDigest: the same policy gives the same digest; changing a
// protection, a limit or the network gives another.
func TestEnvironmentDigest(t *testing.T) {
	needBwrap(t)
	w := sandboxtest.WorkDir(t)
	a, _ := runReport(t, w, nil, "true")
	b, _ := runReport(t, w, nil, "echo different command, same environment")
	if a.Digest == "" || a.Digest != b.Digest {
		t.Fatalf("same policy, digests %q and %q", a.Digest, b.Digest)
	}
	if a.RunID == b.RunID {
		t.Errorf("two runs share run id %s", a.RunID)
	}
	for _, extra := range [][]string{{"--tmp-size", "64M"}, {"--timeout", "1h"}, {"--protect", ".envrc"}, {"--sandbox", "off"}} {
		c, _ := runReport(t, w, extra, "true")
		if c.Digest == a.Digest {
			t.Errorf("%v did not change the environment digest", extra)
		}
	}
}

func TestTierZeroSaysWhatItIs(t *testing.T) {
	w := sandboxtest.WorkDir(t)
	rep, r := runReport(t, w, []string{"--sandbox", "off"}, "echo hi")
	if r.code != 0 || rep.Tier != 0 || rep.Mechanism != "none" {
		t.Errorf("tier 0: exit %d report %+v", r.code, rep)
	}
	if !strings.Contains(r.stderr, "tier 0") || !strings.Contains(r.stderr, "warning") {
		t.Errorf("tier 0 did not warn: %q", r.stderr)
	}
	for _, p := range rep.Protections {
		if strings.HasPrefix(p.Name, "namespace:") && p.Configured {
			t.Errorf("tier 0 claims %s", p.Name)
		}
	}
}
