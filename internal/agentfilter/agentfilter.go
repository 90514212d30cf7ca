// Package agentfilter hands a user's ssh-agent to a sandbox through a
// filter that lets the sandbox list the agent's keys and sign with them,
// and nothing else.
//
// The filter serves a Unix socket outside the sandbox (bound in as
// SSH_AUTH_SOCK) and speaks the ssh-agent protocol
// (draft-miller-ssh-agent) on it: every message is read whole, checked,
// and either passed to the real agent, whose socket it dials by path for
// each connection, or answered SSH_AGENT_FAILURE by the filter itself.
//
// # Guarantees
//
//   - Only two requests reach the agent: REQUEST_IDENTITIES (11), with an
//     empty body, and SIGN_REQUEST (13), whose body is exactly a key blob,
//     the data and the flags with nothing after them. Anything else (add,
//     remove, remove all, lock, unlock, smartcard, constrained add,
//     extension such as session-bind, unknown types) is answered
//     SSH_AGENT_FAILURE and never forwarded.
//   - A request or answer longer than MaxMessage, or one cut short,
//     ends the connection; nothing partial is forwarded.
//   - Each signature request is audited before it is forwarded, with the
//     key's SHA256 fingerprint (as ssh-keygen -l prints it), and its
//     outcome after; each refused request is audited and given to the
//     run's refusal collector.
//   - The agent's answers are passed back only in the shapes that answer
//     the request: IDENTITIES_ANSWER (12) or FAILURE (5) to a listing,
//     SIGN_RESPONSE (14) or FAILURE to a signature; any other answer ends
//     the connection.
//
// # Non-guarantees
//
//   - The filter does not judge what is signed: a command that can use
//     the agent can authenticate as the user to any host it can reach
//     (the allow list decides which). It only sees the fingerprint of the
//     key used.
//   - The agent's own confirmation prompts (ssh-add -c) are the agent's.
package agentfilter

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"sync"
	"time"

	"github.com/sandbox-run/sandbox-run/internal/refusals"
)

// MaxMessage bounds one message each way, as OpenSSH's agent bounds its
// own (AGENT_MAX_LEN, 256 KiB).
const MaxMessage = 256 << 10

// Message types of the ssh-agent protocol the filter knows.
const (
	msgFailure           = 5
	msgRequestIdentities = 11
	msgIdentitiesAnswer  = 12
	msgSignRequest       = 13
	msgSignResponse      = 14
)

// names of the requests the filter refuses, for the audit and the
// refusal's line.
var names = map[byte]string{
	1: "rsa1 request identities", 3: "rsa1 challenge", 7: "rsa1 add identity", 8: "rsa1 remove identity", 9: "rsa1 remove all",
	17: "add identity", 18: "remove identity", 19: "remove all identities", 20: "add smartcard key", 21: "remove smartcard key",
	22: "lock", 23: "unlock", 24: "rsa1 add constrained", 25: "add constrained identity", 26: "add constrained smartcard key",
	27: "extension",
}

func name(t byte) string {
	if n, ok := names[t]; ok {
		return n
	}
	return fmt.Sprintf("unknown message type %d", t)
}

// ReasonRefused is the reason code of a refused agent request.
const ReasonRefused = "agent-request-refused"

// Filter serves the filtered agent.
type Filter struct {
	// Agent is the real agent's socket, dialled for each connection.
	Agent string
	// Audit receives one JSON line per signature and per refusal; nil
	// means none. Each line is one Write.
	Audit io.Writer
	// RunID is put on every audit line.
	RunID string
	// Refusals, when set, is told of each refused request.
	Refusals *refusals.Collector
	// Logger receives operational messages; nil discards them.
	Logger *slog.Logger
}

// Serve accepts connections on ln until ctx is done, then closes ln and
// every connection and returns nil once every connection's goroutine has
// ended; it returns the wrapped error when ln fails first.
func (f *Filter) Serve(ctx context.Context, ln net.Listener) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var wg sync.WaitGroup
	stop := context.AfterFunc(ctx, func() { ln.Close() })
	defer stop()
	var err error
	for {
		c, aerr := ln.Accept()
		if aerr != nil {
			if ctx.Err() == nil {
				err = fmt.Errorf("agentfilter: accept: %w", aerr)
			}
			break
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer c.Close()
			done := context.AfterFunc(ctx, func() { c.Close() })
			defer done()
			f.serveConn(ctx, c)
		}()
	}
	cancel()
	wg.Wait()
	return err
}

// serveConn answers c's requests in turn, dialling the agent on the first
// one that may reach it.
func (f *Filter) serveConn(ctx context.Context, c net.Conn) {
	var agent net.Conn
	stopAgent := func() bool { return false }
	defer func() {
		stopAgent()
		if agent != nil {
			agent.Close()
		}
	}()
	for {
		req, err := readMessage(c)
		if err != nil {
			return
		}
		fp, ok := f.admit(req)
		if !ok {
			if writeMessage(c, []byte{msgFailure}) != nil {
				return
			}
			continue
		}
		if agent == nil {
			d := net.Dialer{Timeout: 5 * time.Second}
			if agent, err = d.DialContext(ctx, "unix", f.Agent); err != nil {
				f.log().Warn("ssh-agent unreachable", "socket", f.Agent, "err", err)
				agent = nil
				if writeMessage(c, []byte{msgFailure}) != nil {
					return
				}
				continue
			}
			a := agent // a blocked exchange ends with Serve
			stopAgent = context.AfterFunc(ctx, func() { a.Close() })
		}
		ans, err := exchange(agent, req)
		if fp != "" {
			f.audit(map[string]any{"event": "ssh_agent_sign", "fingerprint": fp, "decision": "allow", "signed": err == nil && ans[0] == msgSignResponse})
		}
		if err != nil {
			f.log().Debug("ssh-agent exchange", "err", err)
			return
		}
		if writeMessage(c, ans) != nil {
			return
		}
	}
}

// exchange sends req to the agent and reads its answer, which must be
// one that answers req.
func exchange(agent net.Conn, req []byte) ([]byte, error) {
	if err := writeMessage(agent, req); err != nil {
		return nil, err
	}
	ans, err := readMessage(agent)
	if err != nil {
		return nil, err
	}
	want := byte(msgIdentitiesAnswer)
	if req[0] == msgSignRequest {
		want = msgSignResponse
	}
	if ans[0] != want && !(ans[0] == msgFailure && len(ans) == 1) {
		return nil, fmt.Errorf("agentfilter: the agent answered %s with type %d", name(req[0]), ans[0])
	}
	return ans, nil
}

// admit decides req. A signature request it admits comes with its key's
// fingerprint, audited before it is forwarded.
func (f *Filter) admit(req []byte) (fp string, ok bool) {
	switch req[0] {
	case msgRequestIdentities:
		if len(req) == 1 {
			return "", true
		}
	case msgSignRequest:
		if key, ok := parseSign(req[1:]); ok {
			return Fingerprint(key), true
		}
	}
	what := name(req[0])
	if req[0] == msgRequestIdentities || req[0] == msgSignRequest {
		what += " (malformed)"
	}
	f.audit(map[string]any{"event": "ssh_agent", "request": what, "type": int(req[0]), "decision": "refuse", "reason": ReasonRefused})
	f.Refusals.Add(refusals.Refusal{Kind: refusals.KindAgent, Host: "ssh-agent " + what, Reason: ReasonRefused,
		Why: "the sandbox's agent only lists keys and signs"})
	return "", false
}

// parseSign reads a SIGN_REQUEST body: string key blob, string data,
// uint32 flags, and nothing after.
func parseSign(b []byte) (key []byte, ok bool) {
	key, b, ok = readString(b)
	if !ok || len(key) == 0 {
		return nil, false
	}
	_, b, ok = readString(b)
	if !ok || len(b) != 4 {
		return nil, false
	}
	return key, true
}

func readString(b []byte) (s, rest []byte, ok bool) {
	if len(b) < 4 {
		return nil, nil, false
	}
	n := binary.BigEndian.Uint32(b)
	if uint64(n) > uint64(len(b)-4) {
		return nil, nil, false
	}
	return b[4 : 4+n], b[4+n:], true
}

// Fingerprint is the SHA256 fingerprint of an SSH public key blob, as
// ssh-keygen -l prints it: "SHA256:" and unpadded base64.
func Fingerprint(blob []byte) string {
	sum := sha256.Sum256(blob)
	return "SHA256:" + base64.RawStdEncoding.EncodeToString(sum[:])
}

var errTooLong = errors.New("agentfilter: message longer than MaxMessage")

// readMessage reads one length-prefixed message (type and body); an empty
// or oversized one is an error.
func readMessage(r io.Reader) ([]byte, error) {
	var hdr [4]byte
	if _, err := io.ReadFull(r, hdr[:]); err != nil {
		return nil, err
	}
	n := binary.BigEndian.Uint32(hdr[:])
	if n == 0 {
		return nil, errors.New("agentfilter: empty message")
	}
	if n > MaxMessage {
		return nil, errTooLong
	}
	b := make([]byte, n)
	if _, err := io.ReadFull(r, b); err != nil {
		return nil, err
	}
	return b, nil
}

func writeMessage(w io.Writer, m []byte) error {
	b := make([]byte, 4+len(m))
	binary.BigEndian.PutUint32(b, uint32(len(m)))
	copy(b[4:], m)
	_, err := w.Write(b)
	return err
}

func (f *Filter) audit(fields map[string]any) {
	if f.Audit == nil {
		return
	}
	fields["time"] = time.Now().UTC().Format(time.RFC3339Nano)
	if f.RunID != "" {
		fields["run_id"] = f.RunID
	}
	b, err := json.Marshal(fields)
	if err != nil {
		return
	}
	if _, err := f.Audit.Write(append(b, '\n')); err != nil {
		f.log().Warn("audit: write", "err", err)
	}
}

func (f *Filter) log() *slog.Logger {
	if f.Logger == nil {
		return slog.New(slog.DiscardHandler)
	}
	return f.Logger
}
