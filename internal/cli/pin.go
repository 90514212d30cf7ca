package cli

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"

	"github.com/spf13/pflag"

	"github.com/sandbox-run/sandbox-run/mcp"
	"github.com/sandbox-run/sandbox-run/pathguard"
	"github.com/sandbox-run/sandbox-run/policy"
	"github.com/sandbox-run/sandbox-run/sandbox"
)

// ExitPinDiffers is pin diff's status when the server advertises
// something other than the pin.
const ExitPinDiffers = 1

// pinUsage is pin's --help text before the flag list.
const pinUsage = "usage: sandbox-run pin save --out FILE [flags] -- SERVER [ARG...]\n" +
	"       sandbox-run pin diff --pin-from FILE [flags] -- SERVER [ARG...]\n" +
	"Runs SERVER once in a sandbox, as sandbox-run mcp does with the same flags, and lists what a client is shown:\n" +
	"initialize instructions and serverInfo, tools, prompts, resource templates and resources, every member included.\n" +
	"save writes it as a pin file to review and pass to sandbox-run mcp --pin-from FILE.\n" +
	"diff prints one line per change against FILE (added, removed, changed: the members that differ);\n" +
	"exit status 0 when nothing changed, 1 when something did, 125 when it could not tell.\n"

// pinCmd is `sandbox-run pin save|diff [flags] -- SERVER [ARG...]`.
func pinCmd(ctx context.Context, args []string, stdio IO, sigs <-chan os.Signal) int {
	if len(args) == 0 {
		return fail(stdio.Stderr, errors.New("pin: no action; fix: sandbox-run pin save --out FILE -- SERVER, or sandbox-run pin diff --pin-from FILE -- SERVER"))
	}
	switch args[0] {
	case "save", "diff":
		return pinRun(ctx, args[0], args[1:], stdio, sigs)
	case "help", "--help", "-h":
		fmt.Fprint(stdio.Stdout, pinUsage)
		return 0
	}
	return fail(stdio.Stderr, fmt.Errorf("pin %q: no such action; fix: use sandbox-run pin save or sandbox-run pin diff", args[0]))
}

// pinRun takes a snapshot of the server and saves it or diffs it.
func pinRun(ctx context.Context, action string, args []string, stdio IO, sigs <-chan os.Signal) int {
	f := newRunFlags()
	fs := f.fs
	fs.Init("pin "+action, pflag.ContinueOnError)
	mf := addMCPFlags(fs)
	var out string
	if action == "save" {
		fs.StringVar(&out, "out", "", "write the pin file here (outside every --workdir and --write dir)")
		strict(fs, "out")
	}
	var opts mcp.Options
	var pinned *mcp.Pins
	// The invocation's stdin is not an MCP client: refusals are not
	// answered on it.
	pio := IO{Stdout: stdio.Stdout, Stderr: stdio.Stderr}
	pr, code, done := f.prepare(args, pio, sigs, subcommand{
		name:  "pin " + action,
		usage: pinUsage,
		noCmd: "no server; fix: sandbox-run pin " + action + " [flags] -- SERVER [ARG...]",
		check: func() (err error) {
			if err := pinFlagsCheck(f, mf, action, out); err != nil {
				return err
			}
			opts, err = mf.options()
			return err
		},
		beforeAudit: func(p policy.Policy, _ *sandbox.Options) (err error) {
			if action == "save" {
				return checkPinOutput(p, "out", &out)
			}
			pinned, err = readPinFile(p, "pin-from", &mf.pinFrom)
			return err
		},
	})
	if done {
		return code
	}
	if pr.audit != nil {
		defer pr.audit.Close()
		opts.Audit = pr.audit
	}
	opts.Logger = slog.New(slog.NewTextHandler(stdio.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	opts.Sandbox = pr.opts
	now, err := mcp.Snapshot(ctx, pr.p, pr.cmd, opts)
	if err != nil && !errors.Is(err, mcp.ErrSnapshot) {
		return fail(stdio.Stderr, err) // the sandbox's own refusal, with its fix
	}
	if err != nil {
		return fail(stdio.Stderr, fmt.Errorf("pin %s: %v; fix: check that the server starts and answers under these flags (sandbox-run mcp [flags] -- SERVER)", action, err))
	}
	if action == "save" {
		if err := pathguard.WriteFile(out, now.Marshal(), 0o600); err != nil {
			return fail(stdio.Stderr, fmt.Errorf("--out %s: cannot write the pin: %v; fix: keep the file's directory free of symbolic links", out, err))
		}
		fmt.Fprintf(stdio.Stderr, "sandbox-run: pin save: wrote %s to %s; review it, then run sandbox-run mcp --pin-from %s\n", pinCounts(now), out, out)
		return 0
	}
	changes := mcp.DiffPins(pinned, now)
	for _, c := range changes {
		fmt.Fprintln(stdio.Stdout, c.String())
	}
	if len(changes) > 0 {
		return ExitPinDiffers
	}
	return 0
}

// pinFlagsCheck refuses the flags pin cannot use.
func pinFlagsCheck(f *runFlags, mf *mcpFlags, action, out string) error {
	if err := f.relayOnly(); err != nil {
		return err
	}
	switch {
	case mf.pin != "" || mf.pinUpdate:
		return fmt.Errorf("--pin and --pin-update are for sandbox-run mcp; fix: sandbox-run pin %s does not use them, leave them out", action)
	case action == "save" && mf.pinFrom != "":
		return errors.New("--pin-from with pin save: save writes a new pin; fix: name it with --out FILE, or use sandbox-run pin diff --pin-from FILE")
	case action == "save" && out == "":
		return errors.New("pin save without --out; fix: name the pin file with --out FILE")
	case action == "diff" && mf.pinFrom == "":
		return errors.New("pin diff without --pin-from; fix: name the pin to compare with --pin-from FILE")
	case f.report != "":
		return fmt.Errorf("--report with pin %s: the run only lists the server; fix: leave --report out", action)
	}
	return nil
}
