package mcp

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
	"time"

	"github.com/sandbox-run/sandbox-run/policy"
)

// ErrSnapshot is a Snapshot that failed once the server ran: it ended
// early, answered with an error (a *SnapshotError) or not at all.
var ErrSnapshot = errors.New("mcp: snapshot")

// DefaultSnapshotTimeout bounds a Snapshot whose ctx has no deadline.
const DefaultSnapshotTimeout = 2 * time.Minute

// maxSnapshotPages bounds the pages Snapshot reads of one list: a server
// whose cursors never end is not followed forever.
const maxSnapshotPages = 1000

// snapshotLists are the lists Snapshot reads, with the capability the
// server must declare for each.
var snapshotLists = []struct{ method, capability string }{
	{methodToolsList, "tools"},
	{methodPromptsList, "prompts"},
	{methodResourcesTemplatesList, "resources"},
	{methodResourcesList, "resources"},
}

// Snapshot starts server under p once, as Serve does with opts, and asks
// it what a client would be shown: initialize, then every page of
// tools/list, prompts/list, resources/templates/list and resources/list
// that its capabilities offer. It returns what the relay saw, as a version
// 2 pin with every section present (empty for a list the server does not
// offer), and ends the server. The relay's rules apply: what they hide is
// not in the pin. opts.Pins, PinRecord and PinStrict are set by Snapshot.
//
// It fails when the server cannot be started, answers initialize or a
// list it offers with an error, ends early, or takes longer than ctx
// allows (DefaultSnapshotTimeout when ctx has no deadline).
func Snapshot(ctx context.Context, p policy.Policy, server []string, opts Options) (*Pins, error) {
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, DefaultSnapshotTimeout)
		defer cancel()
	}
	opts.Pins, opts.PinRecord, opts.PinStrict = nil, true, false
	maxMsg := opts.MaxMessage
	if maxMsg <= 0 {
		maxMsg = DefaultMaxMessage
	}
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	type served struct {
		res *Result
		err error
	}
	done := make(chan served, 1)
	go func() {
		res, err := Serve(ctx, p, server, inR, outW, opts)
		outW.CloseWithError(io.EOF)
		inR.Close()
		done <- served{res, err}
	}()
	c := &snapClient{w: inW, br: bufio.NewReaderSize(outR, 64<<10), max: maxMsg}
	listed, cerr := c.run()
	inW.Close()
	go io.Copy(io.Discard, outR) // the relay's last words, if any
	s := <-done
	if cerr != nil {
		if s.err != nil && s.res == nil {
			return nil, s.err // the sandbox never started: its reason is the one
		}
		return nil, cerr
	}
	if s.res == nil || s.res.Pins == nil {
		return nil, fmt.Errorf("%w: %v", ErrSnapshot, s.err)
	}
	pins := s.res.Pins
	for _, l := range snapshotLists {
		if sec := listSections[l.method]; pins.Sections[sec] == nil && !listed[l.method] {
			pins.Sections[sec] = map[string]json.RawMessage{}
		}
	}
	if pins.Sections[SectionInitialize] == nil {
		pins.Sections[SectionInitialize] = map[string]json.RawMessage{}
	}
	return pins, nil
}

// snapClient is the client side of a Snapshot: one request at a time.
type snapClient struct {
	w    io.Writer
	br   *bufio.Reader
	max  int
	next int
}

// run initializes and reads every list the server offers, all pages. It
// returns the lists it read.
func (c *snapClient) run() (map[string]bool, error) {
	res, err := c.call(methodInitialize, map[string]any{"protocolVersion": "2025-06-18", "capabilities": map[string]any{},
		"clientInfo": map[string]any{"name": "sandbox-run pin", "version": "1"}})
	if err != nil {
		return nil, err
	}
	var init struct {
		Capabilities map[string]json.RawMessage `json:"capabilities"`
	}
	if err := json.Unmarshal(res, &init); err != nil {
		return nil, fmt.Errorf("%w: the initialize result is not an object: %w", ErrSnapshot, err)
	}
	if err := c.send(map[string]any{"jsonrpc": "2.0", "method": "notifications/initialized"}); err != nil {
		return nil, err
	}
	listed := map[string]bool{}
	for _, l := range snapshotLists {
		if v, ok := init.Capabilities[l.capability]; !ok || string(v) == "null" {
			continue
		}
		if err := c.pages(l.method); err != nil {
			return nil, err
		}
		listed[l.method] = true
	}
	return listed, nil
}

// pages reads every page of a list.
func (c *snapClient) pages(method string) error {
	var cursor *string
	for range maxSnapshotPages {
		params := map[string]any{}
		if cursor != nil {
			params["cursor"] = *cursor
		}
		res, err := c.call(method, params)
		if err != nil {
			return err
		}
		var page struct {
			NextCursor *string `json:"nextCursor"`
		}
		if err := json.Unmarshal(res, &page); err != nil {
			return fmt.Errorf("%w: %s: %w", ErrSnapshot, method, err)
		}
		if page.NextCursor == nil || *page.NextCursor == "" {
			return nil
		}
		cursor = page.NextCursor
	}
	return fmt.Errorf("%w: %s: more than %d pages", ErrSnapshot, method, maxSnapshotPages)
}

func (c *snapClient) send(v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	_, err = c.w.Write(append(b, '\n'))
	return err
}

// call sends one request and returns its result, skipping notifications
// and answering a request from the server with an error (the snapshot
// declares no capability, so the relay refuses those anyway).
func (c *snapClient) call(method string, params any) (json.RawMessage, error) {
	c.next++
	id := strconv.Itoa(c.next)
	if err := c.send(map[string]any{"jsonrpc": "2.0", "id": c.next, "method": method, "params": params}); err != nil {
		return nil, fmt.Errorf("%w: %s: the session ended: %w", ErrSnapshot, method, err)
	}
	var scratch []byte
	for {
		line, err := readLine(c.br, c.max, nil, &scratch)
		if len(line) > 0 {
			if res, done, rerr := c.answer(method, id, line); done {
				return res, rerr
			}
		}
		if err != nil {
			return nil, fmt.Errorf("%w: %s: the session ended before the answer", ErrSnapshot, method)
		}
	}
}

// answer reads one line: done when it is the answer to id.
func (c *snapClient) answer(method, id string, line []byte) (json.RawMessage, bool, error) {
	var m struct {
		ID     json.RawMessage `json:"id"`
		Method string          `json:"method"`
		Result json.RawMessage `json:"result"`
		Error  *struct {
			Code    int    `json:"code"`
			Message string `json:"message"`
		} `json:"error"`
	}
	if json.Unmarshal(line, &m) != nil {
		return nil, false, nil
	}
	switch {
	case m.Method != "" && m.ID != nil:
		c.send(map[string]any{"jsonrpc": "2.0", "id": m.ID, "error": map[string]any{"code": codeMethodNotFound, "message": "sandbox-run pin: not supported"}})
		return nil, false, nil
	case string(m.ID) != id:
		return nil, false, nil
	case m.Error != nil:
		return nil, true, &SnapshotError{Method: method, Code: m.Error.Code, Message: capString(m.Error.Message)}
	case m.Result == nil:
		return nil, true, fmt.Errorf("%w: %s: an answer with neither result nor error", ErrSnapshot, method)
	}
	return m.Result, true, nil
}

// SnapshotError is a JSON-RPC error the server (or the relay) answered a
// Snapshot's request with.
type SnapshotError struct {
	Method  string
	Code    int
	Message string
}

func (e *SnapshotError) Error() string {
	return fmt.Sprintf("mcp: snapshot: %s: error %d: %s", e.Method, e.Code, e.Message)
}

// Is matches ErrSnapshot.
func (e *SnapshotError) Is(target error) bool { return target == ErrSnapshot }
