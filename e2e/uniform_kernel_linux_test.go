package e2e

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/sandbox-run/sandbox-run/internal/sandboxtest"
	"github.com/sandbox-run/sandbox-run/landlock"
)

// uniformRefusal is one value the policy refuses (Policy.Validate) the
// same way whatever the mode and whether it comes from a flag or a
// profile. In args and want, {W} is the workdir and {D} the directory
// around it; {P} is the profile, written from profile when that is set.
type uniformRefusal struct {
	name    string
	args    []string
	profile string
	want    []string
}

func uniformRefusals() []uniformRefusal {
	return []uniformRefusal{
		{name: "allow-host with a space", args: []string{"--allow-host", "exa mple.com"}, want: []string{`"exa mple.com"`, "whitespace"}},
		{name: "allow-host bare star", args: []string{"--allow-host", "*"}, want: []string{`"*"`, "every host"}},
		{name: "allow-host localhost", args: []string{"--allow-host", "localhost:8080"}, want: []string{`"localhost:8080"`, "loopback"}},
		{name: "allow-host metadata", args: []string{"--allow-host", "169.254.169.254"}, want: []string{"169.254.169.254", "metadata"}},
		{name: "allow-host URL in profile", args: []string{"--config", "{P}"}, profile: `{"allow_hosts":["example.com","http://example.org"]}`, want: []string{`"http://example.org"`, "URL"}},
		{name: "memory below 1M", args: []string{"--memory", "512K"}, want: []string{"memory", "524288", "minimum"}},
		{name: "memory below 1M in profile", args: []string{"--config", "{P}"}, profile: `{"memory":1000}`, want: []string{"memory", "1000 bytes", "minimum"}},
		{name: "nofile below 4", args: []string{"--nofile", "3"}, want: []string{"nofile", "3 leaves no descriptor"}},
		{name: "absolute protect outside", args: []string{"--protect", "/etc/passwd"}, want: []string{"/etc/passwd", "not inside a writable directory"}},
		{name: "absolute protect beside the workdir", args: []string{"--protect", "{D}/x"}, want: []string{"{D}/x", "not inside a writable directory"}},
		{name: "protect escapes", args: []string{"--protect", "../x"}, want: []string{`"../x"`}},
		{name: "write a system dir", args: []string{"--write", "/etc"}, want: []string{"/etc", "system directory"}},
		{name: "unprotect not built in", args: []string{"--config", "{P}"}, profile: `{"unprotect":["Makefile"]}`, want: []string{`"Makefile"`}},
		{name: "pass-env not a name", args: []string{"--pass-env", "1X"}, want: []string{`"1X"`}},
		{name: "llm-env without socket", args: []string{"--llm-env", "X_URL"}, want: []string{"llm-env", "--llm-socket"}},
		{name: "unknown cache", args: []string{"--cache", "maven"}, want: []string{`"maven"`}},
		{name: "session name", args: []string{"--session", ".hidden"}, want: []string{`".hidden"`}},
		{name: "negative tmp size in profile", args: []string{"--config", "{P}"}, profile: `{"tmp_size":-1}`, want: []string{"tmp-size", "negative"}},
		{name: "relative read in profile", args: []string{"--config", "{P}"}, profile: `{"read":["etc"]}`, want: []string{`"etc"`, "absolute"}},
	}
}

// refusalMode is one way of starting a command whose refusals of a bad
// value must be the same: a mode of run, or mcp.
type refusalMode struct {
	name string
	args []string
	need func(t *testing.T)
	// caches says a run writes sandbox-run's cache (the bwrap or runsc
	// detection cache, the run journals): the control checks it does.
	caches bool
}

var refusalModes = []refusalMode{
	{"run off", []string{"run", "--sandbox", "off"}, func(*testing.T) {}, false},
	{"run auto", []string{"run"}, needBwrap, true},
	{"run landlock", []string{"run", "--sandbox", "landlock"}, func(t *testing.T) { sandboxtest.Landlock(t, landlock.MinABI) }, false},
	{"run gvisor", []string{"run", "--sandbox", "gvisor"}, func(t *testing.T) { sandboxtest.Runsc(t) }, true},
	{"mcp auto", []string{"mcp"}, needBwrap, true},
}

// TestUniformRefusal runs every bad value of uniformRefusals through every
// mode (tier 0, bwrap, Landlock, gVisor, and mcp in front of bwrap) and
// wants the same refusal from each: exit 125 and the same one line, given
// before anything touches the host: no --report or --audit file, nothing
// in sandbox-run's cache (the bwrap detection cache, the run journals),
// data directory or TMPDIR (runtime dirs, proxies' sockets), no command
// started. The control runs the same invocation with good values in each
// mode and sees the report written and the command run, so that each of
// those checks can fail.
func TestUniformRefusal(t *testing.T) {
	rows := uniformRefusals()
	got := map[string]map[string]string{} // row -> mode -> message, paths as {W}, {D}
	for _, m := range refusalModes {
		t.Run(m.name, func(t *testing.T) {
			m.need(t)
			t.Run("control", func(t *testing.T) { uniformControl(t, m) })
			for _, row := range rows {
				t.Run(row.name, func(t *testing.T) {
					msg := uniformRefused(t, m, row)
					if got[row.name] == nil {
						got[row.name] = map[string]string{}
					}
					got[row.name][m.name] = msg
				})
			}
		})
	}
	for _, row := range rows {
		var first, firstMode string
		for _, m := range refusalModes {
			msg, ok := got[row.name][m.name]
			switch {
			case !ok:
			case firstMode == "":
				first, firstMode = msg, m.name
			case msg != first:
				t.Errorf("%s: %s refuses with\n\t%s\nbut %s with\n\t%s", row.name, m.name, msg, firstMode, first)
			}
		}
	}
}

// uniformDirs are one invocation's directories: the workdir w in d, and
// sandbox-run's cache, data and temporary directories, each empty.
type uniformDirs struct {
	d, w, cache, data, tmp string
}

func newUniformDirs(t *testing.T) uniformDirs {
	t.Helper()
	u := uniformDirs{d: sandboxtest.WorkDir(t)}
	u.w = filepath.Join(u.d, "w")
	mustMkdir(t, u.w)
	sandboxtest.Chown(t, u.w)
	state := sandboxtest.WorkDir(t)
	u.cache, u.data, u.tmp = filepath.Join(state, "cache"), filepath.Join(state, "data"), filepath.Join(state, "tmp")
	for _, p := range []string{u.cache, u.data, u.tmp} {
		mustMkdir(t, p)
	}
	return u
}

func (u uniformDirs) env() []string {
	return []string{"XDG_CACHE_HOME=" + u.cache, "XDG_DATA_HOME=" + u.data, "TMPDIR=" + u.tmp}
}

// args is m's invocation on u's workdir with a report and an audit file,
// then extra, then the command cmd.
func (u uniformDirs) args(m refusalMode, extra []string, cmd ...string) []string {
	a := append(slices.Clone(m.args), "--workdir", u.w, "--report", filepath.Join(u.d, "report.json"),
		"--audit", filepath.Join(u.d, "audit.jsonl"))
	a = append(a, extra...)
	return append(append(a, "--"), cmd...)
}

// uniformControl: with good values the same invocation writes its report
// and runs its command (for mcp: the server starts and ends at once, and
// the report is written all the same).
func uniformControl(t *testing.T, m refusalMode) {
	u := newUniformDirs(t)
	marker := filepath.Join(u.w, "ran")
	r := runEnv(t, u.env(), "", u.args(m, []string{"--allow-host", "example.com", "--nofile", "64",
		"--protect", filepath.Join(u.w, ".x")}, "/bin/sh", "-c", `echo > "$1"`, "sh", marker)...)
	if m.args[0] == "run" && r.code != 0 {
		t.Fatalf("control: exit %d, want 0; stderr: %s", r.code, r.stderr)
	}
	if _, err := os.Stat(filepath.Join(u.d, "report.json")); err != nil {
		t.Fatalf("control: no report written (%v); stderr: %s", err, r.stderr)
	}
	if _, err := os.Stat(marker); err != nil {
		t.Fatalf("control: the command did not run (%v); stderr: %s", err, r.stderr)
	}
	if m.caches && len(tree(t, u.cache)) <= 1 {
		t.Fatalf("control: nothing written to the cache %s, so its staying empty on a refusal would prove nothing", u.cache)
	}
}

// uniformRefused runs row in mode m, checks the refusal and returns its
// message with the invocation's own paths spelled {W} and {D}.
func uniformRefused(t *testing.T, m refusalMode, row uniformRefusal) string {
	u := newUniformDirs(t)
	p := filepath.Join(u.d, "profile.json")
	if row.profile != "" {
		mustWrite(t, p, row.profile)
	}
	subst := strings.NewReplacer("{W}", u.w, "{D}", u.d, "{P}", p)
	extra := make([]string, len(row.args))
	for i, a := range row.args {
		extra[i] = subst.Replace(a)
	}
	marker := "sbx-uniform-" + randHex(t)
	before := tree(t, u.d)
	r := runEnv(t, u.env(), "", u.args(m, extra, "/bin/sh", "-c", "sleep 5; :", marker)...)
	oneLine(t, r, "sandbox-run: ", "fix:")
	msg := strings.TrimSuffix(r.stderr, "\n")
	for _, w := range row.want {
		if w = subst.Replace(w); !strings.Contains(msg, w) {
			t.Errorf("message lacks %q: %s", w, msg)
		}
	}
	if r.stdout != "" {
		t.Errorf("stdout is not empty: %.200q", r.stdout)
	}
	if after := tree(t, u.d); !slices.Equal(before, after) {
		t.Errorf("the refusal touched the job's directory: before %v, after %v", before, after)
	}
	for _, dir := range []string{u.cache, u.data, u.tmp} {
		if left := tree(t, dir); len(left) > 1 {
			t.Errorf("the refusal left %v in %s", left[1:], dir)
		}
	}
	if pids := processesWith(marker); len(pids) > 0 {
		t.Errorf("the refused command runs anyway: pids %v", pids)
	}
	return strings.NewReplacer(u.w, "{W}", u.d, "{D}").Replace(msg)
}
