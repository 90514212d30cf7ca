package cli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strings"
	"time"

	"github.com/spf13/pflag"

	"github.com/sandbox-run/sandbox-run/mcp"
	"github.com/sandbox-run/sandbox-run/pathguard"
	"github.com/sandbox-run/sandbox-run/policy"
	"github.com/sandbox-run/sandbox-run/sandbox"
)

// The bounds of --max-message: below a few KiB an initialize result does
// not fit; above 1 GiB one message could exhaust the node.
const (
	minMaxMessage = 4 << 10
	maxMaxMessage = 1 << 30
)

// mcpUsage is mcp's --help text before the flag list.
const mcpUsage = "usage: sandbox-run mcp [flags] -- SERVER [ARG...]\n" +
	"Relays MCP on stdin/stdout to SERVER running in a sandbox. --audit FILE appends one JSON\n" +
	"line per request either way (time, run id, method, tool, prompt or URI, size, duration, outcome).\n" +
	"With --listen HOST:PORT it serves MCP's Streamable HTTP transport instead, one sandboxed server per client session.\n"

// mcpCmd is `sandbox-run mcp [run flags] [relay flags] -- SERVER [ARG...]`:
// the harness speaks MCP on our stdio, the server runs in the sandbox.
func mcpCmd(ctx context.Context, args []string, stdio IO, sigs <-chan os.Signal) int {
	f := newRunFlags()
	fs := f.fs
	fs.Init("mcp", pflag.ContinueOnError)
	mf := addMCPFlags(fs)
	hf := addHTTPFlags(fs)
	strict(fs, "listen", "token-file", "session-idle")
	var opts mcp.Options
	pr, code, done := f.prepare(args, stdio, sigs, subcommand{
		name:  "mcp",
		usage: mcpUsage,
		noCmd: "no server; fix: sandbox-run mcp [flags] -- SERVER [ARG...]",
		check: func() (err error) {
			if err := f.relayOnly(); err != nil {
				return err
			}
			if opts, err = mf.options(); err != nil {
				return err
			}
			return hf.check(fs, mf, f.report)
		},
		beforeAudit: func(p policy.Policy, _ *sandbox.Options) error { return mf.loadPin(p, &opts) },
	})
	if done {
		return code
	}
	af := pr.audit
	if af != nil {
		defer af.Close()
		// Calls and the sandbox's own records (egress decisions) in one
		// file; every record is a single append.
		opts.Audit = af
	}
	opts.Logger = slog.New(slog.NewTextHandler(stdio.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	opts.Sandbox = pr.opts
	if hf.listen != "" {
		code, served := hf.serveHTTP(ctx, pr.p, pr.cmd, opts, stdio, sigs)
		if !served {
			af.discard()
		}
		return code
	}
	return f.serveStdio(ctx, pr, opts, mf, stdio)
}

// relayOnly refuses the run flags that have no meaning for a relay.
func (f *runFlags) relayOnly() error {
	if f.tty {
		return errors.New("--tty is for sandbox-run run: MCP speaks JSON on stdin and stdout; fix: leave out --tty")
	}
	if f.dryRun {
		return errors.New("--dry-run is for sandbox-run run; fix: use sandbox-run run --dry-run -- SERVER to see the sandbox")
	}
	if f.fs.Changed("exit-code-refusal") {
		return errors.New("--exit-code-refusal is for sandbox-run run so far (a relay's refusals also answer the client's first request); fix: leave out --exit-code-refusal")
	}
	return nil
}

// serveStdio relays MCP on stdio to the sandboxed server until either side
// ends, and returns the exit status.
func (f *runFlags) serveStdio(ctx context.Context, pr *prepared, opts mcp.Options, mf *mcpFlags, stdio IO) int {
	in, first, stop := watchFirst(stdio.Stdin)
	defer stop()
	out := &writeCounter{w: stdio.Stdout}
	res, err := mcp.Serve(ctx, pr.p, pr.cmd, in, out, opts)
	if res == nil {
		pr.audit.discard()
		if first != nil && out.n.Load() == 0 {
			answerFirst(stdio, first, err)
		}
		if errors.Is(err, sandbox.ErrTimeout) {
			// Run's timer ended the set-up: a timeout, as for run.
			fmt.Fprintf(stdio.Stderr, "sandbox-run: %s; fix: raise --timeout\n", strings.ReplaceAll(err.Error(), "\n", " "))
			return ExitTimeout
		}
		return fail(stdio.Stderr, err)
	}
	code := mcpExitCode(stdio.Stderr, res, err)
	if werr := mf.savePin(res, stdio.Stderr); werr != nil {
		fmt.Fprintf(stdio.Stderr, "sandbox-run: %v\n", werr)
		if code == 0 {
			code = ExitRefused
		}
	}
	if res.Sandbox != nil {
		code = f.writeReportFile(stdio.Stderr, res.Sandbox.Report, code)
	}
	if f.summary {
		printSummary(stdio.Stderr, res.Sandbox)
	} else if res.Sandbox != nil {
		printFull(stdio.Stderr, res.Sandbox.Report)
	}
	return code
}

// answerFirst gives the client's first request, sent or still to come (a
// client may start its server before it speaks), the reason the sandbox
// failed before the relay answered anything.
func answerFirst(stdio IO, first <-chan json.RawMessage, err error) {
	t := time.NewTimer(clientWait)
	defer t.Stop()
	select {
	case id := <-first:
		if id != nil {
			stdio.Stdout.Write(rpcError(id, "sandbox-run: "+strings.ReplaceAll(err.Error(), "\n", " ")))
		}
	case <-t.C:
	}
}

// The bounds of --max-pending, --audit-args-max and --audit-line-max.
const (
	maxMaxPending   = 1 << 20
	maxAuditArgsMax = 1 << 30
)

// checkRelayNumbers refuses relay sizes out of their ranges.
func checkRelayNumbers(maxMessage, maxPending, auditArgsMax, auditLineMax int) error {
	for _, n := range []struct {
		flag           string
		v, lo, hi, def int
	}{
		{"max-message", maxMessage, minMaxMessage, maxMaxMessage, mcp.DefaultMaxMessage},
		{"max-pending", maxPending, 1, maxMaxPending, mcp.DefaultMaxPending},
		{"audit-args-max", auditArgsMax, 1, maxAuditArgsMax, mcp.DefaultAuditArgsMax},
		{"audit-line-max", auditLineMax, mcp.MinAuditLineMax, maxAuditArgsMax, mcp.DefaultAuditLineMax},
	} {
		if n.v < n.lo || n.v > n.hi {
			return fmt.Errorf("--%s %d: want a number from %d to %d; fix: leave it out for %d", n.flag, n.v, n.lo, n.hi, n.def)
		}
	}
	return nil
}

// mcpFlags are the relay's own flags.
type mcpFlags struct {
	rules                      mcp.Rules
	denyServer                 []string
	auditArgs                  string
	maxMessage, maxPending     int
	auditArgsMax, auditLineMax int
	pin, pinFrom, name         string
	pinUpdate                  bool
}

func addMCPFlags(fs *pflag.FlagSet) *mcpFlags {
	m := &mcpFlags{}
	fs.StringArrayVar(&m.rules.Allow, "allow-tool", nil, "show and allow only tools matching this glob (repeatable; * and ?; closes prompts and resources unless they have --allow-* of their own)")
	fs.StringArrayVar(&m.rules.Deny, "deny-tool", nil, "hide and refuse tools matching this glob (repeatable; wins over --allow-tool)")
	fs.StringArrayVar(&m.rules.AllowPrompts, "allow-prompt", nil, "show and allow only prompts whose name matches this glob (repeatable)")
	fs.StringArrayVar(&m.rules.DenyPrompts, "deny-prompt", nil, "hide and refuse prompts whose name matches this glob (repeatable)")
	fs.StringArrayVar(&m.rules.AllowResources, "allow-resource", nil, "show and allow only resources whose URI, in canonical form, matches this glob (repeatable; see docs/mcp.md)")
	fs.StringArrayVar(&m.rules.DenyResources, "deny-resource", nil, "hide and refuse resources whose URI, in canonical form, matches this glob (repeatable; see docs/mcp.md)")
	fs.StringArrayVar(&m.denyServer, "deny-server-request", nil, "refuse this request from the server even when the client declared its capability: "+strings.Join(mcp.ServerRequestMethods(), ", ")+" (repeatable)")
	fs.StringVar(&m.auditArgs, "audit-args", "", "record each call's argument values in the --audit file, values that look like secrets redacted; --audit-args=raw keeps them as sent")
	fs.Lookup("audit-args").NoOptDefVal = "redact"
	fs.IntVar(&m.maxMessage, "max-message", mcp.DefaultMaxMessage, "largest JSON-RPC message accepted from either side, in bytes")
	fs.IntVar(&m.maxPending, "max-pending", mcp.DefaultMaxPending, "requests that may wait for an answer at once, each way; more are refused")
	fs.IntVar(&m.auditArgsMax, "audit-args-max", mcp.DefaultAuditArgsMax, "argument bytes kept per call with --audit-args; larger arguments are recorded by size only")
	fs.IntVar(&m.auditLineMax, "audit-line-max", mcp.DefaultAuditLineMax, "longest audit line, in bytes; a longer record loses its argument values")
	fs.StringVar(&m.pin, "pin", "", "trust what the server showed the first session, recorded in this file (initialize instructions and serverInfo, tools, prompts, resource templates, resources, _meta included): a changed or new one is hidden and refused")
	fs.StringVar(&m.pinFrom, "pin-from", "", "trust this reviewed pin file (sandbox-run pin save), never written: a changed, new or unpinned definition is hidden and refused, a changed initialize result withheld")
	fs.StringVar(&m.name, "name", "", "label for the server in the audit's mcp_start record, e.g. filesystem")
	fs.BoolVar(&m.pinUpdate, "pin-update", false, "record this session's tool definitions in the --pin file instead of enforcing it")
	strict(fs, "max-message", "max-pending", "audit-args-max", "audit-line-max", "audit-args", "pin", "pin-from", "name")
	return m
}

// options turns the flags into relay options, refusing what Serve would.
func (m *mcpFlags) options() (mcp.Options, error) {
	if err := checkRelayNumbers(m.maxMessage, m.maxPending, m.auditArgsMax, m.auditLineMax); err != nil {
		return mcp.Options{}, err
	}
	if m.auditArgs != "" && m.auditArgs != "redact" && m.auditArgs != "raw" {
		return mcp.Options{}, fmt.Errorf("--audit-args=%s: want --audit-args (values that look like secrets redacted) or --audit-args=raw; fix: use one of those", m.auditArgs)
	}
	opts := mcp.Options{
		Rules:              m.rules,
		AuditArgs:          m.auditArgs != "",
		AuditArgsRaw:       m.auditArgs == "raw",
		AuditArgsMax:       m.auditArgsMax,
		AuditLineMax:       m.auditLineMax,
		MaxMessage:         m.maxMessage,
		MaxPending:         m.maxPending,
		DenyServerRequests: m.denyServer,
		Name:               m.name,
	}
	return opts, opts.Validate()
}

// mcpExitCode says what the session's end means as an exit status, and
// prints why on stderr when it is not a clean end.
func mcpExitCode(stderr io.Writer, res *mcp.Result, err error) int {
	var ee *sandbox.ExecError
	switch {
	case errors.As(err, &ee), errors.As(err, new(*mcp.SandboxEndError)) && !errors.Is(err, sandbox.ErrTimeout):
		fmt.Fprintf(stderr, "sandbox-run: %v\n", err)
		return res.Sandbox.ExitCode
	case errors.Is(err, sandbox.ErrTimeout):
		// sandbox.Run's own timer ended the server.
		fmt.Fprintf(stderr, "sandbox-run: %v\n", err)
		return ExitTimeout
	case errors.Is(err, mcp.ErrSessionEnded), errors.Is(err, mcp.ErrServerEnded):
		// The harness still wanted the server: never report success.
		fmt.Fprintf(stderr, "sandbox-run: %v\n", err)
		if res.Sandbox.ExitCode == 0 {
			return 1
		}
		return res.Sandbox.ExitCode
	case err != nil:
		fmt.Fprintf(stderr, "sandbox-run: %v\n", err)
		return 1
	case res.ShutdownKilled:
		// The client left and the server lingered: ended as asked.
		return 0
	}
	return res.Sandbox.ExitCode
}

// loadPin reads the --pin or --pin-from file (a host file: refused in or
// through a writable directory, opened without following links) into
// opts. A --pin file that does not exist yet, or --pin-update, makes this
// session record the definitions instead; --pin-from is enforced
// strictly and never written.
func (m *mcpFlags) loadPin(p policy.Policy, opts *mcp.Options) error {
	switch {
	case m.pinFrom != "" && (m.pin != "" || m.pinUpdate):
		return errors.New("--pin-from with --pin or --pin-update: a reviewed pin is never rewritten by the relay; fix: use --pin-from FILE alone, and rewrite FILE with sandbox-run pin save")
	case m.pinFrom != "":
		pins, err := readPinFile(p, "pin-from", &m.pinFrom)
		if err != nil {
			return err
		}
		if pins.Legacy() {
			return fmt.Errorf("--pin-from %s: a version 1 pin holds tool hashes only (not _meta, initialize, prompts or resources); fix: write a version 2 pin with sandbox-run pin save --out %s -- SERVER", m.pinFrom, m.pinFrom)
		}
		opts.Pins, opts.PinStrict = pins, true
		return nil
	case m.pin == "" && m.pinUpdate:
		return errors.New("--pin-update without --pin; fix: name the pin file with --pin FILE")
	case m.pin == "":
		return nil
	}
	if m.pinUpdate {
		if err := checkPinOutput(p, "pin", &m.pin); err != nil {
			return err
		}
		opts.PinRecord = true
		return nil
	}
	pins, err := readPinFile(p, "pin", &m.pin)
	if errors.Is(err, os.ErrNotExist) {
		opts.PinRecord = true
		return checkOutput("pin", m.pin)
	}
	if err != nil {
		return err
	}
	opts.Pins = pins
	return checkOutput("pin", m.pin)
}

// checkPinOutput makes *path absolute and refuses it as a file to write
// (checkHostFiles, checkOutput).
func checkPinOutput(p policy.Policy, flag string, path *string) error {
	var err error
	if *path, err = hostPath(flag, *path); err != nil {
		return err
	}
	if err := checkHostFiles(p, hostFile{flag, *path}); err != nil {
		return err
	}
	return checkOutput(flag, *path)
}

// readPinFile makes *path absolute, refuses it in or through a writable
// directory of p, and reads it without following a link. A file that
// does not exist gives an error wrapping os.ErrNotExist.
func readPinFile(p policy.Policy, flag string, path *string) (*mcp.Pins, error) {
	var err error
	if *path, err = hostPath(flag, *path); err != nil {
		return nil, err
	}
	if err := checkHostFiles(p, hostFile{flag, *path}); err != nil {
		return nil, err
	}
	fh, err := pathguard.OpenFile(*path, os.O_RDONLY, 0)
	if errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("--%s %s: %w; fix: write it with sandbox-run pin save --out %s -- SERVER", flag, *path, err, *path)
	}
	if err != nil {
		return nil, fmt.Errorf("--%s %s: %v; fix: name a regular file by its real path", flag, *path, err)
	}
	defer fh.Close()
	b, err := io.ReadAll(io.LimitReader(fh, maxPinFile+1))
	if err != nil {
		return nil, fmt.Errorf("--%s %s: %v; fix: name a readable file", flag, *path, err)
	}
	if len(b) > maxPinFile {
		return nil, fmt.Errorf("--%s %s: over %d bytes; fix: pin fewer definitions (--allow-tool, --deny-tool)", flag, *path, maxPinFile)
	}
	pins, err := mcp.ParsePins(b)
	if err != nil {
		fix := "write it again with sandbox-run pin save --out " + *path + " (after checking the server)"
		if flag == "pin" {
			fix = "rewrite it with --pin-update (after checking the server), or remove it"
		}
		return nil, fmt.Errorf("--%s %s: %v; fix: %s", flag, *path, err, fix)
	}
	return pins, nil
}

// maxPinFile bounds a pin file sandbox-run reads.
const maxPinFile = 64 << 20

// savePin writes what a session recorded to the --pin file (a first
// session, --pin-update, or sections the pin lacked), without following
// a link. A --pin-from file is never written (its session records
// nothing).
func (m *mcpFlags) savePin(res *mcp.Result, stderr io.Writer) error {
	if m.pin == "" || res == nil || res.Pins == nil {
		return nil
	}
	if err := pathguard.WriteFile(m.pin, res.Pins.Marshal(), 0o600); err != nil {
		return fmt.Errorf("--pin %s: cannot record the definitions: %v; fix: keep the file's directory free of symbolic links", m.pin, err)
	}
	fmt.Fprintf(stderr, "sandbox-run: --pin %s: recorded %s\n", m.pin, pinCounts(res.Pins))
	return nil
}

// pinCounts says how many definitions pins hold, by section.
func pinCounts(pins *mcp.Pins) string {
	var parts []string
	for _, sec := range mcp.PinSections() {
		if m, ok := pins.Sections[sec]; ok {
			parts = append(parts, fmt.Sprintf("%s %d", sec, len(m)))
		}
	}
	return fmt.Sprintf("%d definitions (%s)", pins.Count(), strings.Join(parts, ", "))
}
