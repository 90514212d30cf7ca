package sandbox

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strconv"
	"testing"
	"time"

	"github.com/sandbox-run/sandbox-run/internal/fault"
	"github.com/sandbox-run/sandbox-run/internal/hostnet"
	"github.com/sandbox-run/sandbox-run/internal/mechanism"
	"github.com/sandbox-run/sandbox-run/internal/mechanism/off"
	"github.com/sandbox-run/sandbox-run/internal/refusals"
	"github.com/sandbox-run/sandbox-run/report"

	"github.com/sandbox-run/sandbox-run/bwrap"
	"github.com/sandbox-run/sandbox-run/internal/limits"
	"github.com/sandbox-run/sandbox-run/policy"
)

var updateReport = flag.Bool("update-report", false, "rewrite testdata/report-*.golden.json")

// goldenJSON compares v, as indented JSON, with testdata/name.
func goldenJSON(t *testing.T, name string, v any) {
	t.Helper()
	got, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	got = append(got, '\n')
	path := filepath.Join("testdata", name)
	if *updateReport {
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run go test -run %s -update-report to write it)", err, t.Name())
	}
	if !bytes.Equal(got, want) {
		t.Errorf("%s differs from the report's JSON; if the change is meant, rerun with -update-report and review the diff.\ngot:\n%s", path, got)
	}
}

// fullReport sets every field of Report, so that the golden shows every
// name and shape a harness may read.
func fullReport() report.Report {
	yes := true
	return report.Report{
		Schema: report.ReportSchema, RunID: "0123456789abcdef", Tier: 1, Mechanism: "bwrap", Platform: "linux/amd64",
		Bwrap: &report.BwrapReport{Path: "/usr/bin/bwrap", Version: "0.8.0",
			Features:   bwrap.Features{Args: true, ClearEnv: true, DisableUserns: true, BindFD: true, InfoFD: true, AsPid1: true, Size: true, Perms: true, UnshareCgroupTry: true, Seccomp: true},
			Advisories: []report.Advisory{{ID: "example", Detail: "what is weak", Fix: "what to install"}}},
		Gvisor:      &report.GvisorReport{Path: "/usr/bin/runsc", Version: "release-20220425.0", Platform: "systrap", Rootless: true, HostUDS: true},
		Image:       &report.ImageReport{Reference: "localhost/tool:1", Digest: "sha256:523beec1fb481c6c054bf1e2bb54c008cf6766aa9fa46e69f4121d17dea6e899", ID: "sha256:b731c1fc56b1cdc03793c1a5c71351212316716e60a93c4193f5338662770d90"},
		Namespaces:  []string{"user", "mount", "pid", "ipc", "uts", "net"},
		HostUID:     65534,
		HostGID:     65534,
		Seccomp:     &report.SeccompReport{Digest: "sha256:00", Arch: "x86_64", Ptrace: true, Readback: 2},
		Writable:    []string{"/work/w"},
		ReadOnly:    []string{"/opt/tools"},
		Protected:   []string{"/work/w/.git/config"},
		Watched:     []string{"/work/w/.mcp.json"},
		Copied:      []string{"/work/w/.git/config"},
		ProtectWalk: &report.WalkReport{Dirs: 3, Entries: 40, GitDirs: 1, Micros: 250, Complete: true, Skipped: []string{"/work/w/node_modules"}},
		Quarantined: []report.Quarantined{{Path: "/work/w/.mcp.json", To: "/cache/quarantine/r/1", Why: "created at a protected path", Run: "0123456789abcdef"}},
		Sweep:       &report.WalkReport{Dirs: 2, Entries: 30, GitDirs: 1, Micros: 200, Complete: false, Skipped: []string{"1 directories not walked (/work/w/big ...): the walk stopped after 30 entries (bound 30)"}},
		LiveGuard: &report.LiveGuardReport{Started: true, Watches: 3, Budget: 16384, ReadyMicros: 120, Complete: false,
			Lost: []string{"the run's budget of 16384 inotify watches is spent"}, Unwatched: 2, Overflows: 1, Neutralised: 1},
		TmpSize:    268435456,
		Tmpfs:      []report.TmpfsReport{{Path: "/tmp", Size: 268435456, Enforced: "size"}},
		ReadScan:   &report.ReadScanReport{Paths: 1, Entries: 10, Seconds: 0.001, Covered: []string{"/opt/tools/s.sock"}},
		WriteScan:  &report.ReadScanReport{Paths: 1, Entries: 40, Seconds: 0.002},
		BindsByFD:  true,
		Network:    "proxy (built-in)",
		AllowHosts: []string{"example.com"},
		Secrets:    []report.SecretReport{{Name: "GH_TOKEN", Hosts: []string{"api.github.com"}, From: "env:GH_TOKEN", InBody: true, By: "egress proxy"}},
		TLS:        &report.TLSReport{Terminated: []string{"api.github.com:443"}, Rules: []string{"GET,HEAD api.github.com/repos/**"}, UpstreamRoots: "system", CABundle: "/run/sandbox-run/ca-bundle.pem", CAEnv: []string{"SSL_CERT_FILE"}, Covered: []string{"/etc/ssl/certs/ca-certificates.crt"}},
		EnvNames:   []string{"HOME", "PATH"},
		Notes:      []string{"a note"},
		Egress:     &report.EgressCounts{Allowed: 2, Refused: 1, BytesOut: 100, BytesIn: 2000},
		Refused: []refusals.Refusal{{Kind: refusals.KindConnect, Host: "example.com", Port: 22, Reason: "not-allowed",
			Why: "example.com:22 is not on the allow list", Fix: "--allow-host example.com:22", Count: 2}},
		HandIn: &report.HandInReport{SSHAgent: "/tmp/ssh-x/agent.1", SSHAgentInside: "/run/sandbox-run/ssh-agent.sock", KnownHosts: "/home/u/.ssh/known_hosts",
			KnownHostsInside: "/run/sandbox-run/ssh/known_hosts", Sockets: []report.SocketHandIn{{Path: "/run/docker.sock", Unsafe: true, Why: "serves Docker's API (by its name docker.sock)"}},
			HostPorts: []string{"127.0.0.1:5432"}, Published: []report.PublishedReport{{Inside: 8080, Host: "127.0.0.1:18080"}}},
		Transparent:     &report.Transparent{Enabled: true},
		FullFilesystems: []string{"/work/w"},
		Readback: &report.Readback{PID: 1, UID: 65534, GID: 65534, NoNewPrivs: 1, Seccomp: 2, CapEff: "0000000000000000", CapBnd: "0000000000000000",
			UIDMap: "65534 65534 1", Namespaces: map[string]string{"net": "net:[4026532000]"},
			Kernel: &report.Kernel{Uname: "Linux 4.4.0 #1 SMP Sun Jan 10 15:06:54 PST 2016 x86_64", ProcVersion: "Linux version 4.4.0", Dmesg: "Starting gVisor..."}},
		Protections:       []report.Protection{{Name: "seccomp", Configured: true, Verified: &yes, Detail: "mode 2"}},
		Limits:            []report.Limit{{Name: "pids", Value: "2048", Enforced: "rlimit", Source: report.SourceDefault}},
		OOMScoreAdj:       ptrInt(1000),
		TimeoutSec:        90,
		Exit:              &report.Exit{Code: 137, Class: report.ClassMemoryLimit, Reason: "memory limit exceeded (100 MiB in use, limit 100 MiB); the whole sandbox was ended", Usage: 104857600, Limit: 104857600},
		Landlock:          &report.LandlockReport{ABI: 6, KernelABI: 7, NetworkByPort: true, Scoped: true, ReadbackNoNewPrivs: 1, ReadbackRootDenied: true},
		Losses:            []report.Loss{{Name: "processes", Detail: "no PID namespace"}},
		EnvironmentDigest: "sha256:11",
		Developer:         &report.DeveloperReport{GitIdentity: []string{"user.name", "user.email"}, Toolchains: []string{"/usr/local/go/bin"}},
	}
}

// TestReportGolden pins the report's JSON: every field's name and shape.
// A field added to Report without a value here fails, so the golden
// always shows all of them.
func TestReportGolden(t *testing.T) {
	r := fullReport()
	v := reflect.ValueOf(r)
	for i := range v.NumField() {
		if v.Field(i).IsZero() {
			t.Errorf("fullReport leaves Report.%s zero: give it a value so the golden shows it", v.Type().Field(i).Name)
		}
	}
	goldenJSON(t, "report-full.golden.json", r)
}

// TestReportGoldenTierZero pins what tier 0 claims: nothing but a cleared
// environment and its own session, with every protection it lacks named
// as not configured.
func TestReportGoldenTierZero(t *testing.T) {
	p := policy.Policy{Workdir: "/work/w", Sandbox: policy.ModeOff, Env: map[string]string{"PATH": "/usr/bin:/bin"}}.WithDefaults()
	r, err := off.New(p, []string{"true"}, mechanism.Config{})
	if err != nil {
		t.Fatal(err)
	}
	host, err := r.Probe(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if host.Layout != nil {
		t.Fatalf("tier 0 asked for a mount plan (%+v): it binds nothing", *host.Layout)
	}
	settle := func(*Result) {}
	host, pd, err := prepare(context.Background(), r, p, mechanism.Config{}, &settle)
	if err != nil {
		t.Fatal(err)
	}
	settle(nil)
	if pd.Net.Kind != hostnet.NoNetwork || host.Terminal {
		t.Fatalf("tier 0 asked for a network (%+v) or a terminal (%v): its command has the host's network and the caller's streams", pd.Net.Reach, host.Terminal)
	}
	rep, err := r.Attach(context.Background(), mechanism.Setup{})
	if err != nil {
		t.Fatal(err)
	}
	rep.RunID, rep.HostUID, rep.HostGID, rep.Platform, rep.EnvironmentDigest = "RUN", 1000, 1000, "linux/amd64", "DIGEST"
	rep.Schema = report.ReportSchema // as runMechanism sets it for every mechanism
	// The default memory ceiling is the host's: checked here, shown as
	// a name in the golden.
	if m, err := limits.DefaultMemory(); err == nil {
		for i, l := range rep.Limits {
			if l.Name == "memory" && l.Source == report.SourceDefault {
				if l.Value != strconv.FormatInt(m, 10) {
					t.Errorf("default memory ceiling reported as %s, want %d", l.Value, m)
				}
				rep.Limits[i].Value = "HALF_HOST_MEMORY"
			}
		}
	}
	goldenJSON(t, "report-tier0.golden.json", rep)
}

// TestOutcome is the table of how a mechanism's end becomes Run's: an
// error only for a command that never ran.
func TestOutcome(t *testing.T) {
	ran := func() *Result { return &Result{ExitCode: 137, Report: report.Report{Exit: report.Classify(137, "")}} }
	for _, tt := range []struct {
		name    string
		res     *Result
		err     error
		wantErr bool
		class   report.ExitClass
		reason  string
	}{
		{"exited", &Result{ExitCode: 3, Report: report.Report{Exit: report.Classify(3, "")}}, nil, false, report.ClassExited, ""},
		{"limit", &Result{ExitCode: 137, Report: report.Report{Exit: report.Classify(137, report.ClassPidsLimit)}},
			&mechanism.LimitError{Exceeded: limits.Exceeded{Kind: limits.PidsLimit, Usage: 60, Limit: 50}}, false, report.ClassPidsLimit, "task limit exceeded (60 tasks, limit 50); the whole sandbox was ended"},
		{"killed", &Result{ExitCode: 125, Report: report.Report{Exit: &report.Exit{Code: 125, Class: report.ClassMechanismKilled}}},
			&mechanism.KilledError{Mechanism: "bwrap", Signal: 9}, false, report.ClassMechanismKilled, "bwrap was killed by signal 9; the sandbox was ended with it and the command's status is lost"},
		{"cancelled", ran(), fmt.Errorf("sandbox: %w", context.Canceled), false, report.ClassCancelled, "cancelled (sandbox: context canceled); the whole sandbox was ended"},
		{"not found", &Result{ExitCode: 127}, &ExecError{Code: 127, Command: "x", Reason: "command not found"}, true, "", ""},
		{"setup", nil, fault.New("a", "b", "c"), true, "", ""},
		{"timeout before start", nil, &TimeoutError{Timeout: time.Second}, true, "", ""},
	} {
		res, err := outcome(tt.res, tt.err)
		if (err != nil) != tt.wantErr {
			t.Errorf("%s: err %v, want error %v", tt.name, err, tt.wantErr)
			continue
		}
		if tt.class == "" {
			continue
		}
		if e := res.Report.Exit; e == nil || e.Class != tt.class || e.Reason != tt.reason {
			t.Errorf("%s: exit %+v, want class %s reason %q", tt.name, e, tt.class, tt.reason)
		}
	}
}

// TestExitClasses is the outcome table: every class in one naming style,
// and the codes sandbox-run itself gives.
func TestExitClasses(t *testing.T) {
	for _, tt := range []struct {
		got  *report.Exit
		want report.Exit
	}{
		{report.Classify(0, ""), report.Exit{Code: 0, Class: report.ClassExited}},
		{report.Classify(3, ""), report.Exit{Code: 3, Class: report.ClassExited}},
		{report.Classify(143, ""), report.Exit{Code: 143, Class: report.ClassSignaled}},
		{report.Classify(137, mechanism.LimitClass(limits.MemoryLimit)), report.Exit{Code: 137, Class: report.ClassMemoryLimit}},
		{report.Classify(137, mechanism.LimitClass(limits.PidsLimit)), report.Exit{Code: 137, Class: report.ClassPidsLimit}},
		{report.Classify(152, mechanism.LimitClass(limits.CpuLimit)), report.Exit{Code: 152, Class: report.ClassCPULimit}},
		{report.Classify(ExitTimeout, mechanism.LimitClass(limits.TimedOut)), report.Exit{Code: 124, Class: report.ClassTimedOut}},
		{&report.Exit{Code: ExitNotFound, Class: report.ExecClass(ExitNotFound)}, report.Exit{Code: 127, Class: report.ClassNotFound}},
		{&report.Exit{Code: ExitNotExecutable, Class: report.ExecClass(ExitNotExecutable)}, report.Exit{Code: 126, Class: report.ClassNotExecutable}},
	} {
		if *tt.got != tt.want {
			t.Errorf("got %+v, want %+v", *tt.got, tt.want)
		}
	}
	for _, c := range []report.ExitClass{report.ClassExited, report.ClassSignaled, report.ClassTimedOut, report.ClassMemoryLimit, report.ClassPidsLimit, report.ClassCPULimit, report.ClassNotFound, report.ClassNotExecutable, report.ClassMechanismKilled} {
		for _, r := range c {
			if !(r >= 'a' && r <= 'z' || r == '_') {
				t.Errorf("class %q is not snake case", c)
				break
			}
		}
	}
}

func ptrInt(v int) *int { return &v }
