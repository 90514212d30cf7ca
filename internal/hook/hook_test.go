package hook

import (
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// fakeSandboxRun writes a stand-in for sandbox-run that prints its
// arguments one per NUL, so a test sees exactly the words a shell made of
// the rewritten command.
func fakeSandboxRun(t *testing.T) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "sandbox-run")
	if err := os.WriteFile(p, []byte("#!/bin/sh\nfor a; do printf '%s\\0' \"$a\"; done\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	return p
}

// words runs the rewritten command line in shell the way an agent does
// (shell -c LINE) and returns the words sandbox-run got.
func words(t *testing.T, shell, line string) []string {
	t.Helper()
	out, err := exec.Command(shell, "-c", line).Output()
	if err != nil {
		t.Fatalf("%s -c %q: %v", shell, line, err)
	}
	w := strings.Split(string(out), "\x00")
	return w[:len(w)-1]
}

// quotingCases are commands whose every byte must arrive as written.
var quotingCases = []string{
	"echo hi",
	"",
	"it's",
	`say "hello" 'world'`,
	"line one\nline two\n",
	"echo $HOME ${PATH} $(id -u) `date` $((1+2))",
	`back\slash \' \" \\`,
	"'''",
	"a'\"'\"'b",
	"tab\there; semi; && || | > < * ? [ ] { } ~ # !",
	"unicode: é ü 日本 \u202e",
	"\x01\x1b[31m\x7f",
	"-c",
	"--",
}

// TestCommandQuoting: the original command is the last word sandbox-run
// receives, byte for byte, under bash and under dash (sh).
func TestCommandQuoting(t *testing.T) {
	sbx := fakeSandboxRun(t)
	for _, shell := range []string{"bash", "sh"} {
		if _, err := exec.LookPath(shell); err != nil {
			t.Fatalf("%s not found: %v", shell, err)
		}
		for _, c := range quotingCases {
			line, err := Command(c, "/w d/it's", "claude-x", Options{SandboxRun: sbx, RunFlags: []string{"--allow-host", "*.example.com"}})
			if err != nil {
				t.Fatal(err)
			}
			got := words(t, shell, line)
			want := []string{"run", "--workdir", "/w d/it's", "--session", "claude-x", "--allow-host", "*.example.com", "--", "bash", "-c", c}
			if strings.Join(got, "\x00") != strings.Join(want, "\x00") {
				t.Errorf("%s: %q\ngave %q\nwant %q", shell, line, got, want)
			}
		}
	}
}

// FuzzQuote: any string without NUL comes back from sh unchanged.
func FuzzQuote(f *testing.F) {
	for _, c := range quotingCases {
		f.Add(c)
	}
	f.Fuzz(func(t *testing.T, s string) {
		if strings.IndexByte(s, 0) >= 0 {
			return
		}
		out, err := exec.Command("sh", "-c", "printf %s "+Quote(s)).Output()
		if err != nil {
			t.Fatalf("sh: %v", err)
		}
		if string(out) != s {
			t.Errorf("Quote(%q) = %s gave %q", s, Quote(s), out)
		}
	})
}

func TestCommandRefusesNUL(t *testing.T) {
	if _, err := Command("a\x00b", "/w", "s", Options{SandboxRun: "sandbox-run"}); !errors.Is(err, ErrInput) {
		t.Errorf("NUL: %v, want ErrInput", err)
	}
}

// TestRewritePayloads answers recorded payloads of each agent.
func TestRewritePayloads(t *testing.T) {
	sbx := fakeSandboxRun(t)
	for _, tc := range []struct {
		agent   Agent
		file    string
		workdir string // "" = no answer
		session string
		path    []string // where the tool input is in the answer
		keep    []string // other members of the tool input kept
	}{
		{ClaudeCode, "claude-pretooluse.json", "/home/me/app", "claude-9f1c2b7e-4d3a-4e8b-9a61-0c5d2e7f8a90",
			[]string{"hookSpecificOutput", "updatedInput"}, []string{"description", "timeout"}},
		{ClaudeCode, "claude-pretooluse-read.json", "", "", nil, nil},
		{Gemini, "gemini-beforetool.json", "/home/me/app/backend", "gemini-c0ffee00-1111-2222-3333-444455556666",
			[]string{"hookSpecificOutput", "tool_input"}, []string{"description", "dir_path"}},
		{Gemini, "gemini-beforetool-write.json", "", "", nil, nil},
	} {
		t.Run(tc.file, func(t *testing.T) {
			in, err := os.ReadFile(filepath.Join("testdata", tc.file))
			if err != nil {
				t.Fatal(err)
			}
			out, err := Rewrite(tc.agent, in, Options{SandboxRun: sbx})
			if err != nil {
				t.Fatal(err)
			}
			if tc.workdir == "" {
				if out != nil {
					t.Errorf("answered %s for a tool that is not the shell", out)
				}
				return
			}
			checkAnswer(t, in, out, tc.path, tc.keep, []string{"run", "--workdir", tc.workdir, "--session", tc.session, "--", "bash", "-c"})
		})
	}
}

func checkAnswer(t *testing.T, in, out []byte, path, keep, prefix []string) {
	t.Helper()
	var orig struct {
		ToolInput map[string]any `json:"tool_input"`
	}
	var ans map[string]any
	if err := json.Unmarshal(in, &orig); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(out, &ans); err != nil {
		t.Fatalf("answer %s: %v", out, err)
	}
	v := any(ans)
	for _, k := range path {
		v = v.(map[string]any)[k]
	}
	ti := v.(map[string]any)
	for _, k := range keep {
		if ti[k] != orig.ToolInput[k] {
			t.Errorf("%s: %v, want %v", k, ti[k], orig.ToolInput[k])
		}
	}
	got := words(t, "bash", ti["command"].(string))
	want := append(prefix, orig.ToolInput["command"].(string))
	if strings.Join(got, "\x00") != strings.Join(want, "\x00") {
		t.Errorf("words %q\nwant %q", got, want)
	}
}

func TestClaudeAnswerShape(t *testing.T) {
	in, _ := os.ReadFile("testdata/claude-pretooluse.json")
	out, err := Rewrite(ClaudeCode, in, Options{SandboxRun: "/usr/bin/sandbox-run"})
	if err != nil {
		t.Fatal(err)
	}
	var a struct {
		H struct {
			Event    string `json:"hookEventName"`
			Decision string `json:"permissionDecision"`
		} `json:"hookSpecificOutput"`
	}
	if err := json.Unmarshal(out, &a); err != nil || a.H.Event != "PreToolUse" || a.H.Decision != "allow" {
		t.Errorf("answer %s: %+v %v", out, a, err)
	}
}

// TestRewriteBadInput: what the hook cannot read is an error (the CLI
// exits 2, which blocks the tool), never a pass.
func TestRewriteBadInput(t *testing.T) {
	for _, in := range []string{
		`not json`,
		`{"tool_name":"Bash","hook_event_name":"PreToolUse","cwd":"/w","tool_input":{"command":7}}`,
		`{"tool_name":"Bash","hook_event_name":"PreToolUse","cwd":"relative","tool_input":{"command":"ls"}}`,
		`{"tool_name":"Bash","hook_event_name":"PostToolUse","cwd":"/w","tool_input":{"command":"ls"}}`,
		`{"tool_name":"Bash","hook_event_name":"PreToolUse","cwd":"/w","tool_input":{}}`,
	} {
		if out, err := Rewrite(ClaudeCode, []byte(in), Options{SandboxRun: "s"}); !errors.Is(err, ErrInput) {
			t.Errorf("%s: %s, %v; want ErrInput", in, out, err)
		}
	}
}
