package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

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
	for _, extra := range [][]string{{"--tmp-size", "64M"}, {"--timeout", "1h"}, {"--protect", "deploy.key"}, {"--sandbox", "off"}} {
		c, _ := runReport(t, w, extra, "true")
		if c.Digest == a.Digest {
			t.Errorf("%v did not change the environment digest", extra)
		}
	}
	// With a proxy, each mechanism's run holds ports of its own (Landlock's
	// on the host's loopback): none may leak into the digest. Landlock's
	// network once named its port, and no two of its runs agreed.
	for _, mech := range []string{"bwrap", "landlock"} {
		extra := []string{"--sandbox", mech, "--allow-host", "example.com"}
		c, rc := runReport(t, w, extra, "true")
		d, _ := runReport(t, w, extra, "true")
		if rc.code != 0 || c.Digest == "" || c.Digest != d.Digest || c.Digest == a.Digest {
			t.Errorf("%v: exit %d, digests %q and %q (without a proxy %q): want two equal, new ones", extra, rc.code, c.Digest, d.Digest, a.Digest)
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

// TestReadbackWithoutPtrace: sandbox-run as root without CAP_SYS_PTRACE
// (a container's root) cannot read the namespace links of a sandbox that
// runs as another uid, which the control shows with readlink on a process
// in a user namespace of uid 65534. The report still verifies every
// namespace (from bwrap's --info-fd, and the user namespace from the
// uid_map the command read of itself), transparent egress is on, and
// check still finds tier 1.
func TestReadbackWithoutPtrace(t *testing.T) {
	needBwrap(t)
	sandboxtest.Root(t) // the case is root without CAP_SYS_PTRACE
	setpriv, err := exec.LookPath("setpriv")
	if err != nil {
		sandboxtest.Unavailable(t, "setpriv", "apt-get install -y util-linux")
	}
	noPtrace := []string{setpriv, "--bounding-set", "-sys_ptrace"}

	// Control: the condition is real. A process of uid 65534 in a user
	// namespace of its own; root reads its user namespace link, root
	// without CAP_SYS_PTRACE cannot.
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	sleeper := exec.CommandContext(ctx, setpriv, "--reuid", "65534", "--regid", "65534", "--clear-groups", "unshare", "-U", "sleep", "20")
	if err := sleeper.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { sleeper.Process.Kill(); sleeper.Wait() }()
	link := fmt.Sprintf("/proc/%d/ns/user", sleeper.Process.Pid)
	var ownNS bool
	for i := 0; i < 100 && !ownNS; i++ { // until unshare has run
		l, err := os.Readlink(link)
		self, _ := os.Readlink("/proc/self/ns/user")
		ownNS = err == nil && l != self
		time.Sleep(20 * time.Millisecond)
	}
	if !ownNS {
		t.Fatal("control: the uid-65534 process never showed a user namespace of its own")
	}
	if out, err := exec.CommandContext(ctx, noPtrace[0], append(noPtrace[1:], "readlink", link)...).CombinedOutput(); err == nil {
		t.Fatalf("control: root without CAP_SYS_PTRACE read %s (%s): this test would show nothing", link, out)
	}

	w := sandboxtest.WorkDir(t)
	rep := filepath.Join(sandboxtest.WorkDir(t), "r.json")
	c := exec.CommandContext(ctx, noPtrace[0], append(noPtrace[1:], bin, "run", "--workdir", w, "--user", "65534", "--report", rep,
		"--allow-host", "example.com", "--", "true")...)
	if out, err := c.CombinedOutput(); err != nil {
		t.Fatalf("run without CAP_SYS_PTRACE: %v: %s", err, out)
	}
	// Transparent egress needs no entry into the sandbox's namespaces
	// (the launcher makes the network namespace): it holds here too.
	if on, why, _ := transparentOf(t, rep); !on {
		t.Errorf("without CAP_SYS_PTRACE transparent egress is off: %s", why)
	}
	var r reportJSON
	if b, err := os.ReadFile(rep); err != nil || json.Unmarshal(b, &r) != nil {
		t.Fatalf("report: %v %s", err, b)
	}
	n := 0
	for _, p := range r.Protections {
		if strings.HasPrefix(p.Name, "namespace:") {
			n++
			if p.Verified == nil || !*p.Verified {
				t.Errorf("%s: verified %v, want true", p.Name, p.Verified)
			}
		}
	}
	if n < 6 {
		t.Errorf("%d namespace protections in the report, want at least 6", n)
	}

	out, _ := exec.CommandContext(ctx, noPtrace[0], append(noPtrace[1:], bin, "check", "--json")...).Output()
	var chk struct {
		Tier int `json:"tier"`
	}
	if err := json.Unmarshal(out, &chk); err != nil || chk.Tier != 1 {
		t.Errorf("check without CAP_SYS_PTRACE: tier %d (%v), want 1:\n%s", chk.Tier, err, out)
	}
}

// TestNotRunnableReportedAlike: a command that is not there (127) or may
// not be run (126) ends with the same exit status and the same exit class
// in the report under every mechanism (one owner: the skeleton's classify;
// landlock's report used to have no exit at all). The control, a command
// that runs, is reported "exited" under each.
func TestNotRunnableReportedAlike(t *testing.T) {
	needBwrap(t)
	modes := []string{"off", "bwrap", "landlock"}
	if _, err := exec.LookPath("runsc"); err == nil {
		modes = append(modes, "gvisor")
	} else {
		sandboxtest.Unavailable(t, "runsc on PATH", "apt-get install -y runsc (scripts/install-deps.sh)")
	}
	for _, m := range modes {
		t.Run(m, func(t *testing.T) {
			w := sandboxtest.WorkDir(t)
			if err := os.WriteFile(filepath.Join(w, "noexec"), []byte("#!/bin/sh\n"), 0o644); err != nil {
				t.Fatal(err)
			}
			for _, c := range []struct {
				cmd   string
				code  int
				class string
			}{{"true", 0, "exited"}, {"/nonexistent-" + filepath.Base(w), 127, "not_found"}, {filepath.Join(w, "noexec"), 126, "not_executable"}} {
				rep := filepath.Join(sandboxtest.WorkDir(t), "r.json")
				r := run(t, "", "run", "--sandbox", m, "--workdir", w, "--report", rep, "--", c.cmd)
				var got reportJSON
				b, err := os.ReadFile(rep)
				if err == nil {
					err = json.Unmarshal(b, &got)
				}
				if err != nil || r.code != c.code || got.Exit.Code != c.code || got.Exit.Class != c.class {
					t.Errorf("%s: exit %d, report exit %+v (%v); want %d %s\n%s", c.cmd, r.code, got.Exit, err, c.code, c.class, r.stderr)
				}
			}
		})
	}
}
