package mcp

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strconv"
	"sync"
	"time"
)

// httpSession is one client session of the HTTP transport: the relay
// reads the client's messages from in and writes its own to the session
// (Write), which routes each to a stream: a response to the POST waiting
// for its id, anything else to the GET stream or else an open POST stream.
type httpSession struct {
	id         string
	runID      string         // the relay's, in the audit
	client     string         // "http ADDR", as the audit's mcp_start says
	in         *io.PipeWriter // the relay's client input
	inMu       sync.Mutex
	log        *slog.Logger
	done       chan struct{} // closed when Serve has returned
	sem        chan struct{} // permits to read a message (see httpServer.post)
	maxPending int
	maxLine    int

	mu       sync.Mutex
	waiting  map[string]*sseStream // client request id key -> its POST's stream
	posts    []*sseStream          // open POST streams, oldest first
	get      *sseStream
	busy     int // requests and streams in progress
	lastUsed time.Time
	dropped  int

	partial []byte // a line the relay is writing in pieces (under the relay's client lock)
}

// sseStream is one open response stream.
type sseStream struct {
	idKey string // the request a POST stream answers; "" for GET
	// progress is the progress token its request asked for
	// (progressKey), "" for none.
	progress string
	msgs     chan sseMsg
	closed   chan struct{} // its handler has returned
}

type sseMsg struct {
	b     []byte
	final bool // the response the POST waits for
}

func newStream(idKey string) *sseStream {
	return &sseStream{idKey: idKey, msgs: make(chan sseMsg), closed: make(chan struct{})}
}

// deliver hands b to the stream's handler; false when the handler has
// gone or the session has ended.
func (st *sseStream) deliver(m sseMsg, done <-chan struct{}) bool {
	select {
	case st.msgs <- m:
		return true
	case <-st.closed:
		return false
	case <-done:
		return false
	}
}

// touch counts a request or stream in (+1) or out (-1) of progress.
func (s *httpSession) touch(d int) {
	s.mu.Lock()
	s.busy += d
	s.lastUsed = time.Now()
	s.mu.Unlock()
}

func (s *httpSession) idleFor() time.Duration {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.busy > 0 {
		return 0
	}
	return time.Since(s.lastUsed)
}

// toRelay hands one message (one line, no newline) to the relay.
func (s *httpSession) toRelay(line []byte) error {
	s.inMu.Lock()
	defer s.inMu.Unlock()
	if _, err := s.in.Write(line); err != nil {
		return err
	}
	_, err := s.in.Write([]byte{'\n'})
	return err
}

// Write takes the relay's output to the client, which comes in lines,
// possibly in pieces, and routes each line.
func (s *httpSession) Write(b []byte) (int, error) {
	n := len(b)
	for len(b) > 0 {
		i := bytes.IndexByte(b, '\n')
		if i < 0 {
			s.partial = append(s.partial, b...)
			if len(s.partial) > s.maxLine {
				s.log.Warn("dropped a relay message over the line limit", "limit", s.maxLine)
				s.partial = nil
			}
			return n, nil
		}
		line := append(s.partial, b[:i]...)
		s.partial = nil
		s.route(bytes.Clone(line))
		b = b[i+1:]
	}
	return n, nil
}

// route sends one message of the relay's to the stream it belongs on.
func (s *httpSession) route(line []byte) {
	e, err := parseEnvelope(bytes.TrimSpace(line))
	if err != nil {
		s.log.Warn("dropped a relay message that could not be routed", "error", err.Error())
		return
	}
	if e.kind == kindResponse {
		s.mu.Lock()
		st := s.waiting[e.idKey]
		delete(s.waiting, e.idKey)
		s.mu.Unlock()
		if st == nil || !st.deliver(sseMsg{b: line, final: true}, s.done) {
			s.log.Warn("dropped a response whose client stream has gone", "id", capString(string(e.id)))
		}
		return
	}
	progress := ""
	if e.method == "notifications/progress" {
		progress = progressKey(e, "")
	}
	for _, st := range s.targets(progress) {
		if st.deliver(sseMsg{b: line}, s.done) {
			return
		}
	}
	if e.kind == kindRequest {
		// The server would wait for an answer forever: answer it.
		go s.toRelay(bytes.TrimSuffix(errorLine(e.id, codeServerGone,
			"sandbox-run: the client has no stream open to receive "+e.method, nil), []byte("\n")))
		return
	}
	s.mu.Lock()
	s.dropped++
	d := s.dropped
	s.mu.Unlock()
	if d <= 10 || d%1000 == 0 {
		s.log.Warn("dropped a server notification: the client has no stream open", "method", e.method, "dropped_total", d)
	}
}

// targets are the streams a server-initiated message may go on, in order
// of preference: the POST stream of the request whose progress token a
// progress notification names (it must arrive before that request's
// response, which ends the same stream: on the GET stream a client may
// read it after the response, when it no longer listens for it), the GET
// stream, then the POST streams, oldest first.
func (s *httpSession) targets(progress string) []*sseStream {
	s.mu.Lock()
	defer s.mu.Unlock()
	var ts []*sseStream
	for _, p := range s.posts {
		if progress != "" && p.progress == progress {
			ts = append(ts, p)
		}
	}
	if s.get != nil {
		ts = append(ts, s.get)
	}
	return append(ts, s.posts...)
}

// request relays a client request and answers its POST with an event
// stream carrying, at its end, the response. release is called once the
// relay has the request.
func (s *httpSession) request(w http.ResponseWriter, r *http.Request, line []byte, e envelope, release func()) {
	st := newStream(e.idKey)
	st.progress = progressKey(e, "_meta")
	s.mu.Lock()
	var refuse string
	switch {
	case s.waiting[e.idKey] != nil:
		refuse = fmt.Sprintf("sandbox-run: a request with id %s is already pending; ids must be unique", capString(string(e.id)))
	case len(s.waiting) >= s.maxPending:
		refuse = fmt.Sprintf("sandbox-run: %d requests already pending (--max-pending); refused", s.maxPending)
	}
	if refuse == "" {
		s.waiting[e.idKey] = st
		s.posts = append(s.posts, st)
		s.busy++
	}
	s.mu.Unlock()
	if refuse != "" {
		w.Header().Set("Content-Type", "application/json")
		w.Write(errorLine(e.id, codeBusy, refuse, nil))
		return
	}
	defer func() {
		s.mu.Lock()
		for i, p := range s.posts {
			if p == st {
				s.posts = append(s.posts[:i], s.posts[i+1:]...)
				break
			}
		}
		s.mu.Unlock()
		s.touch(-1)
	}()
	// The handler listens before the relay can answer.
	sent := make(chan error, 1)
	go func() {
		sent <- s.toRelay(line)
		release()
	}()
	if final := s.stream(w, r, st); !final {
		// The session ended, or the client left, before the answer came.
		writeEvent(w, errorLine(e.id, codeServerGone, "sandbox-run: the session ended before the server answered", nil))
	}
	<-sent
}

// stream writes the stream's messages as server-sent events until the
// final one (a POST's response; true), the client leaves or the session
// ends.
func (s *httpSession) stream(w http.ResponseWriter, r *http.Request, st *sseStream) bool {
	defer close(st.closed)
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(http.StatusOK)
	rc := http.NewResponseController(w)
	rc.Flush()
	for {
		select {
		case m := <-st.msgs:
			rc.SetWriteDeadline(time.Now().Add(httpWriteTimeout))
			if err := writeEvent(w, m.b); err != nil || rc.Flush() != nil {
				return m.final // a response that did not get through is lost
			}
			if m.final {
				return true
			}
		case <-r.Context().Done():
			return true // nobody to tell
		case <-s.done:
			return false
		}
	}
}

// writeEvent writes one message as an SSE event. A JSON text has no line
// break outside its strings but as whitespace, and SSE reads CR and LF as
// line ends: they become spaces.
func writeEvent(w io.Writer, msg []byte) error {
	msg = bytes.TrimSpace(msg)
	data := bytes.Map(func(r rune) rune {
		if r == '\r' || r == '\n' {
			return ' '
		}
		return r
	}, msg)
	_, err := fmt.Fprintf(w, "event: message\ndata: %s\n\n", data)
	return err
}

// progressKey is the progress token in a message's params (under meta,
// "_meta", for a request; at the top for notifications/progress), decoded
// so that two spellings of one token match; "" when there is none.
func progressKey(e envelope, meta string) string {
	p, err := parseObject(e.obj["params"])
	if err != nil {
		return ""
	}
	if meta != "" {
		if p, err = parseObject(p[meta]); err != nil {
			return ""
		}
	}
	var v any
	if json.Unmarshal(p["progressToken"], &v) != nil {
		return ""
	}
	switch v := v.(type) {
	case string:
		return "s:" + v
	case float64:
		return "n:" + strconv.FormatFloat(v, 'g', -1, 64)
	}
	return ""
}
