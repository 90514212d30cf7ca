package bwrap

import (
	"testing"

	"github.com/sandbox-run/sandbox-run/internal/initproc"
	"github.com/sandbox-run/sandbox-run/report"
)

func TestEnvironmentDigestCanonical(t *testing.T) {
	base := report.Report{Tier: 1, Mechanism: "bwrap", Platform: "linux/amd64", Network: "none",
		Writable: []string{"/b", "/a"}, Protections: bwrapProtections(true, true, true, 65534, "sha256:x")}
	same := base
	same.Writable = []string{"/a", "/b"} // order does not matter
	same.RunID = "other"                 // nor the run
	if report.Digest(&base) != report.Digest(&same) {
		t.Error("digest depends on order or run id")
	}
	changes := map[string]func(r *report.Report){
		"network":    func(r *report.Report) { r.Network = "proxy (built-in)" },
		"allow":      func(r *report.Report) { r.AllowHosts = []string{"example.com"} },
		"read":       func(r *report.Report) { r.ReadOnly = []string{"/opt"} },
		"tmp":        func(r *report.Report) { r.TmpSize = 1 },
		"limit":      func(r *report.Report) { r.Limits = []report.Limit{{Name: "memory", Value: "1G", Enforced: "cgroup"}} },
		"protection": func(r *report.Report) { r.Protections = bwrapProtections(false, true, true, 65534, "sha256:x") },
		"tier":       func(r *report.Report) { r.Tier = 0 },
	}
	for name, change := range changes {
		r := base
		r.Protections = append([]report.Protection(nil), base.Protections...)
		change(&r)
		if report.Digest(&r) == report.Digest(&base) {
			t.Errorf("changing %s kept the digest", name)
		}
	}
}

func TestVerify(t *testing.T) {
	ps := bwrapProtections(true, true, true, 65534, "")
	verify(ps, &initproc.Readback{NoNewPrivs: 1, Seccomp: 0, CapEff: "0000000000000000", CapBnd: "0000000000000001",
		Namespaces: map[string]string{"net": "net:[1]"}})
	got := map[string]*bool{}
	for _, p := range ps {
		got[p.Name] = p.Verified
	}
	check := func(name string, want *bool) {
		t.Helper()
		g := got[name]
		if (g == nil) != (want == nil) || (g != nil && *g != *want) {
			t.Errorf("%s verified = %v, want %v", name, g, want)
		}
	}
	yes, no := true, false
	check("no_new_privs", &yes)
	check("seccomp", &no)              // read back 0: not in force
	check("capabilities_dropped", &no) // a bounding-set bit left
	check("proc_masking", nil)         // nothing can be read back for it
	check("namespace:net", &yes)       // differs from the test's own
	check("namespace:ipc", nil)        // not read back
	verifyHostUID(ps, 0)
	for _, p := range ps {
		if p.Name == "unprivileged_host_uid" && (p.Verified == nil || *p.Verified) {
			t.Errorf("host uid 0 verified as unprivileged")
		}
	}
}

func TestClassify(t *testing.T) {
	for _, tt := range []struct {
		code  int
		class report.ExitClass
		want  report.ExitClass
	}{{0, "", report.ClassExited}, {3, "", report.ClassExited}, {137, "", report.ClassSignaled}, {143, report.ClassTimedOut, report.ClassTimedOut}, {255, "", report.ClassExited}} {
		if got := report.Classify(tt.code, tt.class); got.Class != tt.want || got.Code != tt.code {
			t.Errorf("report.Classify(%d,%q) = %+v, want %s", tt.code, tt.class, got, tt.want)
		}
	}
}
