package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/spf13/pflag"

	"github.com/sandbox-run/sandbox-run/internal/hook"
)

// ExitHookBlock is the status that makes Claude Code and Gemini CLI block
// the tool: a hook that fails any other way lets the command run as it
// was, outside the sandbox.
const ExitHookBlock = 2

const hookUsage = `usage: sandbox-run hook claude-code|gemini [--shell SH] [-- RUN-FLAGS...]
Reads the agent's pre-tool hook input on stdin and, for its shell tool, answers with the
command rewritten to run inside sandbox-run run --workdir CWD --session AGENT-SESSIONID
[RUN-FLAGS] -- SH -c COMMAND. Other tools get no answer. Unreadable input exits 2 (blocked).
`

// maxHookInput bounds what the hook reads: a command and its fields.
const maxHookInput = 16 << 20

// hookCmd is `sandbox-run hook AGENT [flags] [-- RUN-FLAGS...]`.
func hookCmd(_ context.Context, args []string, stdio IO) int {
	fs := pflag.NewFlagSet("hook", pflag.ContinueOnError)
	shell := fs.String("shell", "bash", "the shell that runs the command inside")
	self := fs.String("sandbox-run", "", "the sandbox-run the command starts (default: this one's absolute path)")
	strict(fs, "shell", "sandbox-run")
	fs.SetOutput(stdio.Stderr)
	fs.Usage = func() { fmt.Fprint(stdio.Stderr, hookUsage); fs.PrintDefaults() }
	block := func(err error) int {
		fmt.Fprintf(stdio.Stderr, "sandbox-run hook: %v\n", err)
		return ExitHookBlock
	}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, pflag.ErrHelp) {
			return 0
		}
		return block(err)
	}
	if fs.NArg() < 1 {
		return block(errors.New("no agent; fix: sandbox-run hook claude-code or sandbox-run hook gemini"))
	}
	agent, err := hook.ParseAgent(fs.Arg(0))
	if err != nil {
		return block(err)
	}
	runFlags := fs.Args()[1:]
	if len(runFlags) > 0 && runFlags[0] == "--" {
		runFlags = runFlags[1:]
	}
	// The run flags are checked now: a bad one would refuse every command.
	rf := newRunFlags()
	rf.fs.SetOutput(io.Discard)
	if err := rf.fs.Parse(runFlags); err != nil || rf.fs.NArg() > 0 {
		return block(fmt.Errorf("run flags %q: not sandbox-run run flags (%v); fix: pass only flags after --", runFlags, err))
	}
	if *self == "" {
		exe, err := os.Executable()
		if err == nil {
			*self, err = filepath.EvalSymlinks(exe)
		}
		if err != nil {
			return block(fmt.Errorf("cannot tell where this sandbox-run is: %v; fix: pass --sandbox-run PATH", err))
		}
	}
	in, err := io.ReadAll(io.LimitReader(stdio.Stdin, maxHookInput+1))
	if err == nil && len(in) > maxHookInput {
		err = fmt.Errorf("input over %d bytes", maxHookInput)
	}
	if err != nil {
		return block(err)
	}
	out, err := hook.Rewrite(agent, in, hook.Options{SandboxRun: *self, Shell: *shell, RunFlags: runFlags})
	if err != nil {
		return block(err)
	}
	if out != nil {
		fmt.Fprintf(stdio.Stdout, "%s\n", out)
	}
	return 0
}
