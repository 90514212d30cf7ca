package mcp

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"time"

	"github.com/sandbox-run/sandbox-run/policy"
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
	// AuditArgs records the arguments of each call, not only their size.
	// Arguments may hold secrets and personal data.
	AuditArgs bool
	// Name labels the server in the audit's mcp_start record (such as the
	// name the client's configuration gives it); empty records none.
	Name string
	// RunID names this session in the audit; empty means a random one.
	RunID string
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
// sandbox. Serve does not close clientOut, and it may leave one goroutine
// blocked reading clientIn until that reader ends.
func Serve(ctx context.Context, p policy.Policy, server []string, clientIn io.Reader, clientOut io.Writer, opts Options) (*Result, error) {
	if err := opts.Rules.Validate(); err != nil {
		return nil, err
	}
	if opts.Sandbox.Stdin != nil || opts.Sandbox.Stdout != nil {
		return nil, errors.New("mcp: Options.Sandbox.Stdin and Stdout must be nil: Serve connects them; fix: leave them unset")
	}
	if len(server) == 0 {
		return nil, &policy.InvalidError{Field: "command", Reason: "empty", Fix: "name the MCP server after --"}
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
		aud = &auditor{w: opts.Audit, runID: res.RunID, now: time.Now}
	}
	r := &relay{rules: opts.Rules, audit: aud, auditArgs: opts.AuditArgs, maxMessage: opts.MaxMessage, log: log}
	if r.maxMessage <= 0 {
		r.maxMessage = DefaultMaxMessage
	}
	grace := opts.ShutdownGrace
	if grace <= 0 {
		grace = DefaultShutdownGrace
	}

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
	defer outR.Close()
	defer inW.Close() // the client half may still hold it, blocked on clientIn

	aud.write(Record{Time: time.Now().UTC(), Event: "mcp_start", Server: server[0], Name: opts.Name, Allow: opts.Rules.Allow, Deny: opts.Rules.Deny})

	runCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	sbOpts := opts.Sandbox
	sbOpts.Stdin, sbOpts.Stdout = inR, outW
	type outcome struct {
		res *sandbox.Result
		err error
	}
	done := make(chan outcome, 1)
	go func() {
		sres, serr := sandbox.Run(runCtx, p, server, sbOpts)
		r.setEndReason(endReason(sres, serr))
		// The sandbox is gone: closing our copies lets the relay read the
		// server's last messages and then EOF.
		inR.Close()
		outW.Close()
		done <- outcome{sres, serr}
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
		relayDone <- r.run(runCtx, streams{clientIn: clientIn, clientOut: clientOut, serverIn: inW, serverOut: outR},
			func() { go clientEOF() })
	}()
	var (
		rerr error
		o    outcome
	)
	select {
	case rerr = <-relayDone:
		o = <-done
	case o = <-done:
		// The server is gone; the relay still delivers what it left. A
		// client that stopped reading must not hold the session open.
		t := time.NewTimer(grace)
		select {
		case rerr = <-relayDone:
		case <-t.C:
			log.Warn("the client stopped reading; the server's last messages were not delivered")
			if !r.clientGone.Load() {
				rerr = errServerEnded
			}
		}
		t.Stop()
	}
	cancel()

	select {
	case <-killed:
		res.ShutdownKilled = true
	default:
	}
	res.ClientClosed = rerr == nil
	end := Record{Time: time.Now().UTC(), Event: "mcp_end", Reason: endReason(o.res, o.err)}
	if o.res != nil {
		end.ExitCode = &o.res.ExitCode
		end.SandboxRunID = o.res.Report.RunID
	}
	aud.write(end)

	if o.res == nil {
		return nil, o.err
	}
	res.Sandbox = o.res
	var ee *sandbox.ExecError
	if errors.As(o.err, &ee) {
		return res, o.err
	}
	if rerr != nil {
		if errors.Is(rerr, errServerEnded) {
			return res, fmt.Errorf("%w (%s)", ErrServerEnded, endReason(o.res, o.err))
		}
		return res, rerr
	}
	// A cancelled ctx (a timeout) stays visible to the caller; the grace
	// kill asked for by the client's leaving does not.
	if ctx.Err() != nil {
		return res, ctx.Err()
	}
	return res, nil
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
	case res.ExitCode > 128:
		return fmt.Sprintf("it was killed by signal %d", res.ExitCode-128)
	default:
		return fmt.Sprintf("it exited with status %d", res.ExitCode)
	}
}

func newRunID() string {
	b := make([]byte, 8)
	rand.Read(b)
	return hex.EncodeToString(b)
}
