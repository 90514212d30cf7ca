package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strings"
	"time"

	"github.com/spf13/pflag"

	"github.com/sandbox-run/sandbox-run/mcp"
	"github.com/sandbox-run/sandbox-run/sandbox"
)

// The bounds of --max-message: below a few KiB an initialize result does
// not fit; above 1 GiB one message could exhaust the node.
const (
	minMaxMessage = 4 << 10
	maxMaxMessage = 1 << 30
)

// mcpCmd is `sandbox-run mcp [run flags] [relay flags] -- SERVER [ARG...]`:
// the harness speaks MCP on our stdio, the server runs in the sandbox.
func mcpCmd(ctx context.Context, args []string, stdio IO, sigs <-chan os.Signal) int {
	f := newRunFlags()
	fs := f.fs
	fs.Init("mcp", pflag.ContinueOnError)
	fs.SetOutput(io.Discard)
	var (
		allow, deny []string
		auditArgs   bool
		maxMessage  int
	)
	fs.StringArrayVar(&allow, "allow-tool", nil, "show and allow only tools matching this glob (repeatable; * and ?)")
	fs.StringArrayVar(&deny, "deny-tool", nil, "hide and refuse tools matching this glob (repeatable; wins over --allow-tool)")
	fs.BoolVar(&auditArgs, "audit-args", false, "record each call's argument values in the --audit file, not only their size")
	fs.IntVar(&maxMessage, "max-message", mcp.DefaultMaxMessage, "largest JSON-RPC message accepted from either side, in bytes")
	strict(fs, "max-message")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, pflag.ErrHelp) {
			fmt.Fprintf(stdio.Stdout, "usage: sandbox-run mcp [flags] -- SERVER [ARG...]\n"+
				"Relays MCP on stdin/stdout to SERVER running in a sandbox. --audit FILE appends one JSON\n"+
				"line per tools/call (time, run id, tool, argument size, duration, outcome).\n%s", fs.FlagUsages())
			return 0
		}
		return fail(stdio.Stderr, fmt.Errorf("%v; fix: see sandbox-run mcp --help", err))
	}
	cmd := fs.Args()
	if fs.ArgsLenAtDash() < 0 && len(cmd) > 0 {
		return fail(stdio.Stderr, fmt.Errorf("the server must follow --; fix: sandbox-run mcp [flags] -- %s", strings.Join(cmd, " ")))
	}
	if len(cmd) == 0 {
		return fail(stdio.Stderr, errors.New("no server; fix: sandbox-run mcp [flags] -- SERVER [ARG...]"))
	}
	if maxMessage < minMaxMessage || maxMessage > maxMaxMessage {
		return fail(stdio.Stderr, fmt.Errorf("--max-message %d: want a size from %d to %d bytes; fix: leave it out for %d", maxMessage, minMaxMessage, maxMaxMessage, mcp.DefaultMaxMessage))
	}
	if f.dryRun {
		return fail(stdio.Stderr, errors.New("--dry-run is for sandbox-run run; fix: use sandbox-run run --dry-run -- SERVER to see the sandbox"))
	}
	// --audit gets the relay's call records and the sandbox's own
	// (egress decisions); the relay opens it.
	auditPath := f.audit
	rules := mcp.Rules{Allow: allow, Deny: deny}
	if err := rules.Validate(); err != nil {
		return fail(stdio.Stderr, err)
	}
	p, err := f.policy(os.Getwd)
	if err == nil {
		err = p.Validate()
	}
	if err != nil {
		return fail(stdio.Stderr, err)
	}
	if stdio.ScrubArgv {
		scrubEnvValues(args)
	}
	if fi, err := os.Stat(p.Workdir); err != nil || !fi.IsDir() {
		return fail(stdio.Stderr, fmt.Errorf("workdir %s does not exist or is not a directory; fix: create it (mkdir -p %s) or pass --workdir DIR", p.Workdir, p.Workdir))
	}
	opts := mcp.Options{
		Rules:      rules,
		AuditArgs:  auditArgs,
		MaxMessage: maxMessage,
		Logger:     slog.New(slog.NewTextHandler(stdio.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn})),
		Sandbox: sandbox.Options{
			BwrapPath:  f.bwrapPath,
			RunscPath:  f.runscPath,
			BwrapCache: cacheDir(),
			Stderr:     stdio.Stderr,
			Signals:    sigs,
			LookupEnv:  os.LookupEnv,
		},
	}
	if err := f.hostFiles(p); err != nil {
		return fail(stdio.Stderr, err)
	}
	var af *auditFile
	if auditPath = f.audit; auditPath != "" {
		if af, err = openAudit(auditPath); err != nil {
			return fail(stdio.Stderr, err)
		}
		defer af.Close()
		// Calls and the sandbox's own records (egress decisions) in one
		// file; every record is a single append.
		opts.Audit = af
		opts.Sandbox.Audit = af
	}
	runCtx := ctx
	if p.Timeout > 0 {
		var cancel context.CancelFunc
		runCtx, cancel = context.WithTimeout(ctx, time.Duration(p.Timeout))
		defer cancel()
	}
	res, err := mcp.Serve(runCtx, p, cmd, stdio.Stdin, stdio.Stdout, opts)
	var ee *sandbox.ExecError
	code := 0
	switch {
	case res == nil:
		af.discard()
		return fail(stdio.Stderr, err)
	case errors.As(err, &ee), errors.As(err, new(*sandbox.KilledError)):
		fmt.Fprintf(stdio.Stderr, "sandbox-run: %v\n", err)
		code = res.Sandbox.ExitCode
	case errors.Is(err, context.DeadlineExceeded) && p.Timeout > 0:
		fmt.Fprintf(stdio.Stderr, "sandbox-run: timed out after %s; the whole sandbox was ended\n", time.Duration(p.Timeout))
		code = ExitTimeout
	case errors.Is(err, mcp.ErrServerEnded):
		// The harness still wanted the server: never report success.
		fmt.Fprintf(stdio.Stderr, "sandbox-run: %v\n", err)
		code = res.Sandbox.ExitCode
		if code == 0 {
			code = 1
		}
	case err != nil:
		fmt.Fprintf(stdio.Stderr, "sandbox-run: %v\n", err)
		code = 1
	case res.ShutdownKilled:
		// The client left and the server lingered: ended as asked.
	default:
		code = res.Sandbox.ExitCode
	}
	if f.report != "" {
		if werr := writeReport(f.report, res.Sandbox.Report); werr != nil {
			fmt.Fprintf(stdio.Stderr, "sandbox-run: cannot write the report: %v; fix: keep the report's directory and every directory above it free of symbolic links, and the path free of anything but a regular file\n", werr)
			if code == 0 {
				code = ExitRefused
			}
		}
	}
	if f.summary {
		printSummary(stdio.Stderr, res.Sandbox)
	} else if res.Sandbox != nil {
		printFull(stdio.Stderr, res.Sandbox.Report)
	}
	return code
}
