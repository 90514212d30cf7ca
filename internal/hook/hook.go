// Package hook answers an agent's pre-tool hook: it rewrites the agent's
// shell command so that it runs inside sandbox-run run, with the
// session's directory as the workdir and a home named for the session.
//
// Guarantees: the original command reaches the shell inside the sandbox
// byte for byte (it is one single-quoted word of the rewritten command,
// which a POSIX shell reads back unchanged); every other field of the
// tool's input is passed on as it came; a tool that is not the agent's
// shell gets no answer (nil), which the agents read as "go on unchanged".
// Input that cannot be read is an error, which the CLI turns into exit 2:
// both agents block the tool on it, where any other failure would let
// the command run unsandboxed.
//
// Not guaranteed: that the command behaves as it would outside (no
// network unless the extra run flags allow it, writes only in the
// workdir and the session's home, a cd does not outlive the command).
package hook

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"runtime"
	"strings"
)

// Agent names a hook format.
type Agent string

// The agents whose hook format Rewrite speaks.
const (
	// ClaudeCode: PreToolUse, tool Bash; the answer's
	// hookSpecificOutput.updatedInput replaces the tool's input.
	ClaudeCode Agent = "claude-code"
	// Gemini: Gemini CLI's BeforeTool, tool run_shell_command; the
	// answer's hookSpecificOutput.tool_input is merged over the input.
	Gemini Agent = "gemini"
)

// Agents lists the agents, for messages.
var Agents = []Agent{ClaudeCode, Gemini}

// ErrInput says the hook's input is not what the agent sends.
var ErrInput = errors.New("hook input not understood")

// Options say how the command is run.
type Options struct {
	// SandboxRun is the sandbox-run binary the rewritten command starts.
	SandboxRun string
	// Shell runs the original command inside: bash by default (both
	// agents' shell tools run bash, and their models write its syntax).
	Shell string
	// RunFlags are more flags for sandbox-run run (e.g. --allow-host),
	// each one word.
	RunFlags []string
}

// input is what both agents send (Gemini adds a timestamp, Claude Code
// transcript_path and permission_mode; neither is needed).
type input struct {
	SessionID     string                     `json:"session_id"`
	Cwd           string                     `json:"cwd"`
	HookEventName string                     `json:"hook_event_name"`
	ToolName      string                     `json:"tool_name"`
	ToolInput     map[string]json.RawMessage `json:"tool_input"`
}

// spec is where an agent's format differs.
type spec struct {
	event, tool, sessionPrefix string
	answer                     func(toolInput map[string]json.RawMessage, reason string) any
}

var specs = map[Agent]spec{
	ClaudeCode: {event: "PreToolUse", tool: "Bash", sessionPrefix: "claude-", answer: claudeAnswer},
	Gemini:     {event: "BeforeTool", tool: "run_shell_command", sessionPrefix: "gemini-", answer: geminiAnswer},
}

func claudeAnswer(ti map[string]json.RawMessage, reason string) any {
	return map[string]any{"hookSpecificOutput": map[string]any{
		"hookEventName":            "PreToolUse",
		"permissionDecision":       "allow",
		"permissionDecisionReason": reason,
		"updatedInput":             ti,
	}}
}

func geminiAnswer(ti map[string]json.RawMessage, reason string) any {
	return map[string]any{
		"decision": "allow",
		"reason":   reason,
		"hookSpecificOutput": map[string]any{
			"hookEventName": "BeforeTool",
			"tool_input":    ti,
		},
	}
}

// ParseAgent checks an agent name given by the user.
func ParseAgent(s string) (Agent, error) {
	if _, ok := specs[Agent(s)]; ok {
		return Agent(s), nil
	}
	return "", fmt.Errorf("unknown agent %q: use %s or %s", s, ClaudeCode, Gemini)
}

// Rewrite reads the agent's hook input and returns the answer to print,
// nil when the tool is not the agent's shell.
func Rewrite(agent Agent, in []byte, opts Options) ([]byte, error) {
	sp, ok := specs[agent]
	if !ok {
		return nil, fmt.Errorf("unknown agent %q", agent)
	}
	var h input
	if err := json.Unmarshal(in, &h); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrInput, err)
	}
	if h.ToolName != sp.tool {
		return nil, nil
	}
	if h.HookEventName != sp.event {
		return nil, fmt.Errorf("%w: event %q, want %s (install the hook under %s)", ErrInput, h.HookEventName, sp.event, sp.event)
	}
	var command string
	if err := json.Unmarshal(h.ToolInput["command"], &command); err != nil {
		return nil, fmt.Errorf("%w: tool_input.command is not a string", ErrInput)
	}
	workdir, err := workdirOf(h.Cwd, h.ToolInput)
	if err != nil {
		return nil, err
	}
	wrapped, err := Command(command, workdir, sp.sessionPrefix+sessionName(h.SessionID), opts)
	if err != nil {
		return nil, err
	}
	ti := make(map[string]json.RawMessage, len(h.ToolInput))
	for k, v := range h.ToolInput {
		ti[k] = v
	}
	ti["command"], _ = json.Marshal(wrapped)
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false) // && stays readable in the agent's log
	if err := enc.Encode(sp.answer(ti, "sandbox-run: the command runs inside sandbox-run (workdir "+workdir+")")); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(b.Bytes(), []byte("\n")), nil
}

// workdirOf is the directory the command runs in: the session's cwd, or
// Gemini's dir_path (the tool's own directory argument) under it.
func workdirOf(cwd string, ti map[string]json.RawMessage) (string, error) {
	if !filepath.IsAbs(cwd) {
		return "", fmt.Errorf("%w: cwd %q is not an absolute path", ErrInput, cwd)
	}
	var dir string
	for _, k := range []string{"dir_path", "directory"} {
		if raw, ok := ti[k]; ok && json.Unmarshal(raw, &dir) == nil && dir != "" {
			break
		}
	}
	if dir == "" {
		return filepath.Clean(cwd), nil
	}
	if !filepath.IsAbs(dir) {
		dir = filepath.Join(cwd, dir)
	}
	return filepath.Clean(dir), nil
}

// sessionName makes a session id a --session name: letters, digits, '.',
// '_' and '-', at most 48 bytes (the policy allows 64 with the prefix).
func sessionName(id string) string {
	var b strings.Builder
	for _, r := range id {
		if b.Len() >= 48 {
			break
		}
		switch {
		case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r >= '0' && r <= '9', r == '.', r == '_', r == '-':
			b.WriteRune(r)
		default:
			b.WriteByte('_')
		}
	}
	if b.Len() == 0 {
		return "default"
	}
	return b.String()
}

// sessionsKept says whether sandbox-run keeps session homes here: only
// Linux does (elsewhere --session is refused, and every command with it
// would be); without one, HOME is each run's private /tmp.
const sessionsKept = runtime.GOOS == "linux"

// Command is the shell command that runs command inside sandbox-run run
// with workdir and, on Linux, the named session home.
func Command(command, workdir, session string, opts Options) (string, error) {
	shell := opts.Shell
	if shell == "" {
		shell = "bash"
	}
	words := []string{opts.SandboxRun, "run", "--workdir", workdir}
	if sessionsKept {
		words = append(words, "--session", session)
	}
	words = append(words, opts.RunFlags...)
	words = append(words, "--", shell, "-c", command)
	q := make([]string, len(words))
	for i, w := range words {
		if strings.IndexByte(w, 0) >= 0 {
			return "", fmt.Errorf("%w: a NUL byte in %q cannot pass through a shell", ErrInput, truncate(w))
		}
		q[i] = Quote(w)
	}
	return strings.Join(q, " "), nil
}

func truncate(s string) string {
	if len(s) > 40 {
		return s[:40] + "..."
	}
	return s
}

// Quote makes s one word for a POSIX shell: single quotes, inside which
// nothing is special, each single quote of s written as quote, backslash,
// quote, quote (end the quoted part, a quoted quote, start again). Words
// of only safe characters stay bare; '=' is not one of them (a first
// word holding it would be an assignment).
func Quote(s string) string {
	if s != "" && strings.Trim(s, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_./:@,+") == "" {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}
