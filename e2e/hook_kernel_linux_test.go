package e2e

// sandbox-run hook: an agent's shell command, rewritten by the hook and
// run as the agent runs it (bash -c), runs inside sandbox-run: it writes
// its workdir and cannot write outside it. The controls run the same
// command as the agent would without the hook, and it writes outside.

import (
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sandbox-run/sandbox-run/internal/sandboxtest"
)

// sessionsDir is where sandbox-run keeps sessions' homes for this user
// (see dataDir in internal/cli): the tests remove the ones they made.
func sessionsDir(t *testing.T) string {
	if os.Geteuid() == 0 {
		return "/var/lib/sandbox-run/sessions"
	}
	d := t.TempDir()
	t.Setenv("XDG_DATA_HOME", d)
	return filepath.Join(d, "sandbox-run", "sessions")
}

// removeNewSessions removes the sessions whose names start with prefix
// that were not in dir before the test.
func removeNewSessions(t *testing.T, dir, prefix string) {
	before := map[string]bool{}
	ents, _ := os.ReadDir(dir)
	for _, e := range ents {
		before[e.Name()] = true
	}
	t.Cleanup(func() {
		ents, _ := os.ReadDir(dir)
		for _, e := range ents {
			if strings.HasPrefix(e.Name(), prefix) && !before[e.Name()] {
				os.RemoveAll(filepath.Join(dir, e.Name()))
			}
		}
	})
}

// escapeScript writes in.txt in its directory (with quoting that must
// survive: a quote, $, backticks, a newline) and a marker in outside.
func escapeScript(outside string) string {
	return "printf '%s\\n' \"it's $((6*7))\" `echo tick` > in.txt\necho out > " + outside + "/marker"
}

func TestHookRunsInside(t *testing.T) {
	needBwrap(t)
	sessions := sessionsDir(t)
	w := sandboxtest.WorkDir(t)
	outside := t.TempDir()
	script := escapeScript(outside)

	// The control: the command as Claude Code runs it without the hook.
	ctl := t.TempDir()
	if out, err := bashIn(ctl, script); err != nil {
		t.Fatalf("control: %v\n%s", err, out)
	}
	if _, err := os.Stat(filepath.Join(outside, "marker")); err != nil {
		t.Fatalf("control: the command did not write outside (untested): %v", err)
	}
	os.Remove(filepath.Join(outside, "marker"))

	for _, tc := range []struct{ agent, file string }{
		{"claude-code", "claude-pretooluse.json"},
		{"gemini", "gemini-beforetool.json"},
	} {
		t.Run(tc.agent, func(t *testing.T) {
			sid := randomID(t)
			removeNewSessions(t, sessions, "")
			payload := recordedPayload(t, tc.file, sid, w, script)
			r := runBin(t, bin, nil, string(payload), "hook", tc.agent)
			if r.code != 0 {
				t.Fatalf("hook: %d %s", r.code, r.stderr)
			}
			command := answeredCommand(t, r.stdout)
			// The write outside fails inside, so the script's status is 1
			// (not sandbox-run's 125: the command ran).
			out, err := bashIn(w, command)
			if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 1 {
				t.Fatalf("the rewritten command: %v, want exit status 1\n%s", err, out)
			}
			got, err := os.ReadFile(filepath.Join(w, "in.txt"))
			if err != nil || string(got) != "it's 42\ntick\n" {
				t.Errorf("in.txt %q %v: the command did not run in its workdir as written", got, err)
			}
			os.Remove(filepath.Join(w, "in.txt"))
			if _, err := os.Stat(filepath.Join(outside, "marker")); err == nil {
				t.Fatal("the hooked command wrote outside its workdir")
			}
		})
	}
}

func bashIn(dir, script string) ([]byte, error) {
	c := exec.Command("bash", "-c", script)
	c.Dir = dir
	return c.CombinedOutput()
}

func randomID(t *testing.T) string {
	b := make([]byte, 8)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	return "sbxtest-" + hex.EncodeToString(b)
}

// recordedPayload is the agent's recorded hook input (internal/hook's
// testdata) with this test's session, directory and command.
func recordedPayload(t *testing.T, file, sid, cwd, command string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "internal", "hook", "testdata", file))
	if err != nil {
		t.Fatal(err)
	}
	var p map[string]any
	if err := json.Unmarshal(b, &p); err != nil {
		t.Fatal(err)
	}
	p["session_id"], p["cwd"] = sid, cwd
	ti := p["tool_input"].(map[string]any)
	ti["command"] = command
	delete(ti, "dir_path")
	out, _ := json.Marshal(p)
	return out
}

// answeredCommand is the command of either agent's answer.
func answeredCommand(t *testing.T, out string) string {
	t.Helper()
	var a struct {
		H struct {
			Updated   map[string]any `json:"updatedInput"`
			ToolInput map[string]any `json:"tool_input"`
		} `json:"hookSpecificOutput"`
	}
	if err := json.Unmarshal([]byte(out), &a); err != nil {
		t.Fatalf("answer %q: %v", out, err)
	}
	for _, m := range []map[string]any{a.H.Updated, a.H.ToolInput} {
		if c, ok := m["command"].(string); ok {
			return c
		}
	}
	t.Fatalf("no command in the answer %s", out)
	return ""
}

// TestClaudePrintBashInside: the real claude -p, talking to a fake
// Messages API on loopback that asks for one Bash call, runs that call
// inside sandbox-run when the hook is installed in the project's
// .claude/settings.json: the file it writes in the project is there, the
// one outside is not. The control, without the hook: both are written.
func TestClaudePrintBashInside(t *testing.T) {
	needBwrap(t)
	claude := claudeBinary(t)
	sessions := sessionsDir(t)
	removeNewSessions(t, sessions, "claude-")
	for _, hooked := range []bool{false, true} {
		w := sandboxtest.WorkDir(t)
		outside := t.TempDir()
		api := newFakeMessagesAPI(t, escapeScript(outside))
		settings := `{}`
		if hooked {
			settings = `{"hooks": {"PreToolUse": [{"matcher": "Bash", "hooks": [{"type": "command", "command": ` + jsonQuote(bin+" hook claude-code") + `}]}]}}`
		}
		if err := os.MkdirAll(filepath.Join(w, ".claude"), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(w, ".claude", "settings.json"), []byte(settings), 0o644); err != nil {
			t.Fatal(err)
		}
		env := agentEnv(t.TempDir(), "ANTHROPIC_BASE_URL="+api.URL, "ANTHROPIC_API_KEY=sk-ant-sandbox-run-test")
		if xdg := os.Getenv("XDG_DATA_HOME"); xdg != "" {
			env = append(env, "XDG_DATA_HOME="+xdg)
		}
		out, err := runAgent(t, w, env, claude, "-p", "Write the two files.", "--allowedTools", "Bash", "--output-format", "text")
		if err != nil || api.toolUses() != 1 {
			t.Fatalf("hooked %v: claude -p: %v, %d tool uses asked\n%s", hooked, err, api.toolUses(), out)
		}
		got, err := os.ReadFile(filepath.Join(w, "in.txt"))
		if err != nil || string(got) != "it's 42\ntick\n" {
			t.Fatalf("hooked %v: in.txt %q %v: the Bash call did not run\n%s\nresults: %q", hooked, got, err, out, api.results)
		}
		_, err = os.Stat(filepath.Join(outside, "marker"))
		switch {
		case !hooked && err != nil:
			t.Fatalf("control: claude's Bash call did not write outside (untested): %v\n%s", err, out)
		case hooked && err == nil:
			t.Fatalf("with the hook, claude's Bash call wrote outside its workdir\n%s", out)
		}
	}
}
