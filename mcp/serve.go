package mcp

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strings"
	"time"

	"github.com/sandbox-run/sandbox-run/internal/exitcode"
	"github.com/sandbox-run/sandbox-run/policy"
	"github.com/sandbox-run/sandbox-run/report"
	"github.com/sandbox-run/sandbox-run/sandbox"
)

// ErrServerEnded means the server's output ended (it exited, crashed or
// was killed) while the client was still connected. Requests it left
// unanswered were answered with a JSON-RPC error.
var ErrServerEnded = errors.New("mcp: the server ended while the client was connected")

// DefaultShutdownGrace is how long Serve waits, after the client's input
// ended and the server's input was closed, before it ends the sandbox.
const DefaultShutdownGrace = 5 * time.Second

// Options say how to relay. The zero value relays every message, shows
// every tool and records nothing.
type Options struct {
	// Rules hide tools; the zero value hides none.
	Rules Rules
	// Audit, when set, receives one JSON line (a Record) per tools/call and
	// one at the start and end of the session. Nil records nothing. To
	// have the sandbox's network decisions in the same file, set
	// Sandbox.Audit to the same writer (each record is one Write).
	Audit io.Writer
	// AuditArgs records the arguments of each tools/call, not only their
	// size, with values that look like secrets replaced (see the rule at
	// redact) unless AuditArgsRaw is set. Arguments may hold secrets and
	// personal data the rule does not recognise.
	AuditArgs    bool
	AuditArgsRaw bool
	// AuditArgsMax is the most argument bytes kept per call; larger
	// arguments are recorded by size only. Zero means DefaultAuditArgsMax.
	AuditArgsMax int
	// AuditLineMax bounds one audit line; a record that would be longer
	// loses its argument values. Zero means DefaultAuditLineMax.
	AuditLineMax int
	// MaxPending is how many requests may wait for an answer at once, in
	// each direction; one more is refused with a JSON-RPC error (-32000).
	// Zero means DefaultMaxPending.
	MaxPending int
	// Pins, when set, are what the client trusts of the server (see
	// Pins): an initialize result whose instructions or serverInfo differ
	// from the pin is withheld (the client gets -32603 naming what
	// changed); a listed tool, prompt, resource template or resource whose
	// definition differs, or that the pin does not name, is hidden, and
	// requests naming such a tool, prompt or resource are refused; each
	// with a warning on Logger and an audit record (mcp_tool_changed,
	// mcp_definition_changed). A section the pins lack is recorded as
	// first seen, unless PinStrict, and then hides every entry of it.
	// With PinRecord, every definition is accepted instead. Result.Pins
	// holds what the caller should save (see Result). Without Pins, a
	// definition that changes within the session is still warned about
	// and audited.
	Pins      *Pins
	PinRecord bool
	PinStrict bool
	// DenyServerRequests names server-to-client requests to refuse even
	// when the client declared the capability they need: any of
	// ServerRequestMethods. Without a declared capability they are refused
	// anyway.
	DenyServerRequests []string
	// Name labels the server in the audit's mcp_start record (such as the
	// name the client's configuration gives it); empty records none.
	Name string
	// RunID names this session in the audit; empty means a random one.
	RunID string
	// Client says who the client is, for the mcp_start record (ServeHTTP
	// sets "http ADDR"); empty means the one on stdio.
	Client string
	// MaxMessage is the largest message accepted from either side, in
	// bytes; zero means DefaultMaxMessage. A larger client message is
	// answered with an error; a larger server message ends the session.
	MaxMessage int
	// ShutdownGrace is how long a server may take to exit once the client
	// has gone; zero means DefaultShutdownGrace.
	ShutdownGrace time.Duration
	// Sandbox is how to run the server. Its Stdin and Stdout must be nil:
	// Serve connects them to the relay. Its Stderr (nil: /dev/null)
	// receives the server's stderr as it is.
	Sandbox sandbox.Options
	// Logger receives the relay's own warnings (dropped lines); nil
	// discards them.
	Logger *slog.Logger
}

// Result is the outcome of a session whose sandbox was set up.
type Result struct {
	// Sandbox is the server's run: its exit status and isolation report.
	Sandbox *sandbox.Result
	// ClientClosed says the client ended the session (its input ended)
	// before the server exited; ShutdownKilled that the server then did
	// not exit within the grace and the sandbox was ended.
	ClientClosed, ShutdownKilled bool
	// RunID is the session's name in the audit.
	RunID string
	// Pins are the pins to save, nil when there is nothing to save: with
	// Options.PinRecord, what the session was shown; else, with
	// Options.Pins and not PinStrict, those pins plus the sections the
	// session recorded because the pins lacked them (a version 1 pin
	// written as version 2 once its tools all matched).
	Pins *Pins
}

// Serve starts server under p and relays MCP between it and a client that
// reads clientOut and writes clientIn, until the server's output ends.
//
// It returns when the server and everything it started have ended. The
// error wraps ErrServerEnded when the server ended while the client was
// still connected (res is set); it is a sandbox error (policy.ErrInvalid,
// sandbox.ErrSetup, sandbox.ErrUnsupported, *sandbox.ExecError) when the
// server never ran, in which case every request the client sent was
// answered with an error naming the reason. Cancelling ctx ends the
// sandbox. Serve does not close clientOut and writes nothing to it once it
// has returned; it may leave one goroutine blocked reading clientIn until
// that reader ends.
func Serve(ctx context.Context, p policy.Policy, server []string, clientIn io.Reader, clientOut io.Writer, opts Options) (*Result, error) {
	if err := checkServe(server, opts); err != nil {
		return nil, err
	}
	res := &Result{RunID: opts.RunID}
	if res.RunID == "" {
		res.RunID = newRunID()
	}
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	var aud *auditor
	if opts.Audit != nil {
		aud = &auditor{w: opts.Audit, runID: res.RunID, now: time.Now, maxLine: opts.AuditLineMax}
	}
	r := newRelay(opts, aud, log)
	grace := opts.ShutdownGrace
	if grace <= 0 {
		grace = DefaultShutdownGrace
	}
	sp, err := newServerPipes()
	if err != nil {
		return nil, err
	}
	defer sp.outR.Close()
	defer sp.inW.Close() // the client half may still hold it, blocked on clientIn
	aud.write(startRecord(server, opts))

	runCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	done := startServer(runCtx, p, server, opts.Sandbox, sp, r)
	// When the relay gives up on the session (a message it cannot relay
	// safely), the server is ended at once: nothing it says can reach the
	// client any more.
	go func() {
		select {
		case <-r.over:
			cancel()
		case <-runCtx.Done():
		}
	}()
	killed := make(chan struct{})
	clientEOF := func() {
		t := time.NewTimer(grace)
		defer t.Stop()
		select {
		case <-t.C:
			close(killed)
			cancel()
		case <-runCtx.Done():
		}
	}
	relayDone := make(chan error, 1)
	go func() {
		relayDone <- r.run(runCtx, streams{clientIn: clientIn, clientOut: clientOut, serverIn: sp.inW, serverOut: sp.outR},
			func() { go clientEOF() })
	}()
	o, rerr := waitSession(relayDone, done, grace, r, log)
	// The client's half may still be reading: what it reads from now on is
	// the caller's to answer (see the doc above), never the relay's too.
	r.shutClient()
	cancel()
	select {
	case <-killed:
		res.ShutdownKilled = true
	default:
	}
	res.ClientClosed = rerr == nil
	res.Pins = r.recorded()
	serr := r.sessionErr()
	aud.write(endRecord(o.res, o.err, serr))
	if o.res == nil {
		return nil, o.err
	}
	res.Sandbox = o.res
	return res, sessionError(ctx, o.res, o.err, serr, rerr)
}

// checkServe refuses what Serve cannot run: invalid options, streams the
// caller set that Serve connects itself, no server.
func checkServe(server []string, opts Options) error {
	if err := opts.Validate(); err != nil {
		return err
	}
	if opts.Sandbox.Stdin != nil || opts.Sandbox.Stdout != nil {
		return errors.New("mcp: Options.Sandbox.Stdin and Stdout must be nil: Serve connects them; fix: leave them unset")
	}
	if len(server) == 0 {
		return &policy.InvalidError{Field: "command", Reason: "empty", Fix: "name the MCP server after --"}
	}
	return nil
}

// serverPipes are the server's stdin and stdout: the relay writes inW and
// reads outR; the sandbox gets inR and outW.
type serverPipes struct {
	inR, inW, outR, outW *os.File
}

func newServerPipes() (*serverPipes, error) {
	inR, inW, err := os.Pipe()
	if err != nil {
		return nil, fmt.Errorf("mcp: pipe: %w", err)
	}
	outR, outW, err := os.Pipe()
	if err != nil {
		inR.Close()
		inW.Close()
		return nil, fmt.Errorf("mcp: pipe: %w", err)
	}
	return &serverPipes{inR: inR, inW: inW, outR: outR, outW: outW}, nil
}

// startRecord is the audit's mcp_start: the server, its label and the
// rules in force.
func startRecord(server []string, opts Options) Record {
	opts.Rules = opts.Rules.canonicalPatterns()
	return Record{Time: time.Now().UTC(), Event: "mcp_start", Server: capString(server[0]), Name: capString(opts.Name),
		Client: capString(opts.Client),
		Allow:  opts.Rules.Allow, Deny: opts.Rules.Deny, AllowPrompts: opts.Rules.AllowPrompts, DenyPrompts: opts.Rules.DenyPrompts,
		AllowResources: opts.Rules.AllowResources, DenyResources: opts.Rules.DenyResources, DenyFromServer: opts.DenyServerRequests}
}

// startServer runs the server in its sandbox on sp's ends; its outcome
// arrives on the channel once the sandbox is gone.
func startServer(ctx context.Context, p policy.Policy, server []string, sbOpts sandbox.Options, sp *serverPipes, r *relay) <-chan outcome {
	sbOpts.Stdin, sbOpts.Stdout = sp.inR, sp.outW
	done := make(chan outcome, 1)
	go func() {
		sres, serr := sandbox.Run(ctx, p, server, sbOpts)
		r.setEndReason(endReason(sres, serr))
		// The sandbox is gone: closing our copies lets the relay read the
		// server's last messages and then EOF.
		sp.inR.Close()
		sp.outW.Close()
		done <- outcome{sres, serr}
	}()
	return done
}

// outcome is how the sandbox ended.
type outcome struct {
	res *sandbox.Result
	err error
}

// waitSession waits for the relay and the sandbox to end. When the
// sandbox ends first, the relay still delivers what the server left, but a
// client that stopped reading must not hold the session open past grace.
func waitSession(relayDone <-chan error, done <-chan outcome, grace time.Duration, r *relay, log *slog.Logger) (outcome, error) {
	select {
	case rerr := <-relayDone:
		return <-done, rerr
	case o := <-done:
		t := time.NewTimer(grace)
		defer t.Stop()
		select {
		case rerr := <-relayDone:
			return o, rerr
		case <-t.C:
			log.Warn("the client stopped reading; the server's last messages were not delivered")
			if !r.clientGone.Load() {
				return o, errServerEnded
			}
			return o, nil
		}
	}
}

// endRecord is the mcp_end record: why the session ended.
func endRecord(sres *sandbox.Result, err, serr error) Record {
	end := Record{Time: time.Now().UTC(), Event: "mcp_end", Reason: endReason(sres, err)}
	if serr != nil {
		end.Reason = serr.Error() + "; the server was ended (" + end.Reason + ")"
	}
	if sres != nil {
		end.ExitCode = &sres.ExitCode
		end.SandboxRunID = sres.Report.RunID
	}
	return end
}

// sessionError is Serve's error for a session whose sandbox ran: the
// server not starting, the relay ending the session (serr), the server
// ending first, or ctx (a timeout).
func sessionError(ctx context.Context, sres *sandbox.Result, err, serr, rerr error) error {
	var ee *sandbox.ExecError
	switch {
	case errors.As(err, &ee):
		return err
	case endedBy(sres, report.ClassTimedOut), endedBy(sres, report.ClassMechanismKilled):
		return &SandboxEndError{Exit: *sres.Report.Exit}
	case serr != nil:
		return serr
	case errors.Is(rerr, errServerEnded):
		return fmt.Errorf("%w (%s)", ErrServerEnded, endReason(sres, err))
	case rerr != nil:
		return rerr
	}
	// A cancelled ctx (a timeout) stays visible to the caller; the grace
	// kill asked for by the client's leaving does not.
	return ctx.Err()
}

// SandboxEndError is a session that sandbox-run ended from outside the
// server: the policy's timeout (it matches sandbox.ErrTimeout), or the
// mechanism killed. Exit says which, and why.
type SandboxEndError struct {
	Exit report.Exit
}

func (e *SandboxEndError) Error() string { return e.Exit.Reason }

// Is matches sandbox.ErrTimeout for a session the timeout ended.
func (e *SandboxEndError) Is(target error) bool {
	return target == sandbox.ErrTimeout && e.Exit.Class == report.ClassTimedOut
}

// endedBy says whether the sandbox's run ended with class c.
func endedBy(res *sandbox.Result, c report.ExitClass) bool {
	return res != nil && res.Report.Exit != nil && res.Report.Exit.Class == c
}

// endReason says in a few words why the server stopped.
func endReason(res *sandbox.Result, err error) string {
	var ee *sandbox.ExecError
	switch {
	case errors.As(err, &ee):
		return "it could not be started: " + ee.Error()
	case res == nil && err != nil:
		return "the sandbox could not be set up: " + err.Error()
	case res == nil:
		return "it did not start"
	case endedBy(res, report.ClassTimedOut):
		return "the timeout ended it"
	default:
		if sig, ok := exitcode.Signal(res.ExitCode); ok {
			return fmt.Sprintf("it was killed by signal %d", sig)
		}
		return fmt.Sprintf("it exited with status %d", res.ExitCode)
	}
}

func newRunID() string {
	b := make([]byte, 8)
	rand.Read(b)
	return hex.EncodeToString(b)
}

// Validate refuses options Serve would refuse: malformed patterns (see
// Rules), an unknown DenyServerRequests method, negative sizes, an
// AuditLineMax under MinAuditLineMax.
func (o Options) Validate() error {
	if err := o.Rules.Validate(); err != nil {
		return err
	}
	for _, m := range o.DenyServerRequests {
		if _, ok := serverRequests[m]; !ok {
			return fmt.Errorf("mcp: --deny-server-request %q: not a server request the relay gates; fix: name one of %s",
				m, strings.Join(ServerRequestMethods(), ", "))
		}
	}
	for _, n := range []struct {
		flag string
		v    int
	}{{"max-message", o.MaxMessage}, {"max-pending", o.MaxPending}, {"audit-args-max", o.AuditArgsMax}, {"audit-line-max", o.AuditLineMax}} {
		if n.v < 0 {
			return fmt.Errorf("mcp: --%s %d: negative; fix: leave it out for the default", n.flag, n.v)
		}
	}
	if o.PinStrict && (o.Pins == nil || o.PinRecord) {
		return errors.New("mcp: Options.PinStrict needs Pins and no PinRecord: a reviewed pin is enforced, not recorded; fix: set Pins, or leave PinStrict out")
	}
	if o.AuditLineMax != 0 && o.AuditLineMax < MinAuditLineMax {
		return fmt.Errorf("mcp: --audit-line-max %d: under %d bytes, a record's names and rule may not fit; fix: leave it out for %d",
			o.AuditLineMax, MinAuditLineMax, DefaultAuditLineMax)
	}
	return nil
}

// newRelay builds the relay for opts, defaults filled in.
func newRelay(opts Options, aud *auditor, log *slog.Logger) *relay {
	r := &relay{rules: opts.Rules.canonicalPatterns(), audit: aud, maxMessage: opts.MaxMessage, maxPending: opts.MaxPending, log: log,
		denyFromSrv: map[string]bool{}}
	if r.maxMessage <= 0 {
		r.maxMessage = DefaultMaxMessage
	}
	for _, m := range opts.DenyServerRequests {
		r.denyFromSrv[m] = true
	}
	r.pin.pins, r.pin.record, r.pin.strict = opts.Pins, opts.PinRecord, opts.PinStrict
	if r.pin.record && r.pin.pins == nil {
		r.pin.pins = &Pins{Version: PinVersion, Sections: map[string]map[string]json.RawMessage{}}
	}
	r.auditArgs.max = opts.AuditArgsMax
	if r.auditArgs.max <= 0 {
		r.auditArgs.max = DefaultAuditArgsMax
	}
	switch {
	case !opts.AuditArgs:
		r.auditArgs.mode = argsOff
	case opts.AuditArgsRaw:
		r.auditArgs.mode = argsRaw
	default:
		r.auditArgs.mode = argsRedact
	}
	r.init()
	return r
}
