package mcp

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sandbox-run/sandbox-run/policy"
	"github.com/sandbox-run/sandbox-run/sandbox"
)

func TestCheckToken(t *testing.T) {
	for _, c := range []struct {
		tok string
		ok  bool
	}{
		{NewToken(), true},
		{strings.Repeat("a", MinTokenBytes), true},
		{strings.Repeat("a", MinTokenBytes-1), false},
		{"", false},
		{strings.Repeat("a", MinTokenBytes) + " b", false},
		{strings.Repeat("a", MinTokenBytes) + "\r\nX-Evil: 1", false},
		{strings.Repeat("é", MinTokenBytes), false},
	} {
		if err := CheckToken(c.tok); (err == nil) != c.ok || (err != nil && !errors.Is(err, ErrWeakToken)) {
			t.Errorf("CheckToken(%q) = %v, want ok %v", c.tok, err, c.ok)
		}
	}
	if a, b := NewToken(), NewToken(); a == b {
		t.Error("NewToken repeats itself")
	}
}

func TestLoopbackHost(t *testing.T) {
	for host, want := range map[string]bool{
		"127.0.0.1:8765": true, "localhost:1": true, "LOCALHOST": true, "[::1]:80": true, "127.1.2.3": true,
		"evil.example:8765": false, "10.0.0.1:80": false, "localhost.evil.example": false, "": false, "[::ffff:8.8.8.8]:1": false,
	} {
		if got := loopbackHost(host); got != want {
			t.Errorf("loopbackHost(%q) = %v, want %v", host, got, want)
		}
	}
}

// TestServeHTTPRefuses: a non-loopback listener without AllowRemote and a
// weak token are refused before anything is served. Control: the same
// listener with AllowRemote is served (until ctx ends).
func TestServeHTTPRefuses(t *testing.T) {
	listen := func(addr string) net.Listener {
		ln, err := net.Listen("tcp", addr)
		if err != nil {
			t.Fatalf("cannot listen on %s: %v", addr, err)
		}
		return ln
	}
	srv := []string{"/bin/true"}
	err := ServeHTTP(context.Background(), listen("0.0.0.0:0"), policy.Policy{}, srv, HTTPOptions{Token: NewToken()})
	if !errors.Is(err, ErrNotLoopback) {
		t.Errorf("0.0.0.0 without AllowRemote: %v, want ErrNotLoopback", err)
	}
	err = ServeHTTP(context.Background(), listen("127.0.0.1:0"), policy.Policy{}, srv, HTTPOptions{Token: "short"})
	if !errors.Is(err, ErrWeakToken) {
		t.Errorf("a short token: %v, want ErrWeakToken", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	err = ServeHTTP(ctx, listen("0.0.0.0:0"), policy.Policy{}, srv, HTTPOptions{Token: NewToken(), AllowRemote: true})
	if err != nil {
		t.Errorf("control: 0.0.0.0 with AllowRemote: %v, want served until ctx ended", err)
	}
}

// TestWriteEvent: a message's CR and LF (JSON whitespace) cannot end the
// SSE data line and start a field of the server's choosing.
func TestWriteEvent(t *testing.T) {
	var b bytes.Buffer
	writeEvent(&b, []byte("{\"a\":\r\"x\",\n\"b\":1}\n"))
	want := "event: message\ndata: {\"a\": \"x\", \"b\":1}\n\n"
	if b.String() != want {
		t.Errorf("got %q, want %q", b.String(), want)
	}
}

// TestSessionRoute: the relay's output, written in pieces, reaches the
// stream waiting for its id; a server request with no stream open is
// answered for the server; a notification is dropped.
func TestSessionRoute(t *testing.T) {
	pr, pw := io.Pipe()
	s := &httpSession{in: pw, log: slog.New(slog.DiscardHandler), waiting: map[string]*sseStream{},
		done: make(chan struct{}), maxPending: 4, maxLine: 1 << 20}
	st := newStream("n:5")
	s.waiting["n:5"] = st
	got := make(chan sseMsg, 1)
	go func() { got <- <-st.msgs }()
	for _, part := range []string{`{"jsonrpc":"2.0",`, `"id":5,"result":{}}`, "\n"} {
		s.Write([]byte(part))
	}
	select {
	case m := <-got:
		if !m.final || string(m.b) != `{"jsonrpc":"2.0","id":5,"result":{}}` {
			t.Errorf("the waiting stream got %+v", m)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the response did not reach its stream")
	}
	s.Write([]byte(`{"jsonrpc":"2.0","method":"notifications/message","params":{}}` + "\n"))
	s.Write([]byte(`{"jsonrpc":"2.0","id":"s1","method":"sampling/createMessage","params":{}}` + "\n"))
	answer := make(chan string, 1)
	go func() {
		l, _ := bufio.NewReader(pr).ReadString('\n')
		answer <- l
	}()
	select {
	case l := <-answer:
		// The notification was dropped: the first line is the answer.
		if !strings.Contains(l, `"id":"s1"`) || !strings.Contains(l, `"error"`) {
			t.Errorf("the server's request was answered with %q", l)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the server's request with no stream open was not answered")
	}
	if s.dropped != 1 {
		t.Errorf("%d notifications dropped, want 1", s.dropped)
	}
}

// TestServeHTTPSessions drives ServeHTTP in process (tier 0, the mcptest
// server), sessions and calls in parallel, for the race detector: each
// call's answer reaches its own POST, a denied tool is refused in every
// session, and ServeHTTP returns once ctx has ended.
func TestServeHTTPSessions(t *testing.T) {
	srv := filepath.Join(t.TempDir(), "mcptest-server")
	if out, err := exec.Command("go", "build", "-o", srv, "../internal/mcptest/server").CombinedOutput(); err != nil {
		t.Fatalf("building the mcptest server: %v\n%s", err, out)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	url := "http://" + ln.Addr().String() + HTTPPath
	tok := NewToken()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	served := make(chan error, 1)
	p := policy.Policy{Sandbox: policy.ModeOff, Workdir: t.TempDir()}
	go func() {
		served <- ServeHTTP(ctx, ln, p, []string{srv}, HTTPOptions{Token: tok,
			Relay: Options{Rules: Rules{Deny: []string{"write_file"}}, Sandbox: sandbox.Options{LookupEnv: os.LookupEnv}}})
	}()
	post := func(sid, body string) (*http.Response, string) {
		req, _ := http.NewRequest("POST", url, strings.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+tok)
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		if sid != "" {
			req.Header.Set("Mcp-Session-Id", sid)
		}
		res, err := (&http.Client{Timeout: 30 * time.Second}).Do(req)
		if err != nil {
			t.Error(err)
			return &http.Response{}, ""
		}
		defer res.Body.Close()
		b, _ := io.ReadAll(res.Body)
		return res, string(b)
	}
	session := func() {
		res, body := post("", `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`)
		sid := res.Header.Get("Mcp-Session-Id")
		if sid == "" {
			t.Errorf("initialize: %d %s", res.StatusCode, body)
			return
		}
		post(sid, `{"jsonrpc":"2.0","method":"notifications/initialized"}`)
		var calls sync.WaitGroup
		for j := 2; j < 8; j++ {
			calls.Add(1)
			go func() {
				defer calls.Done()
				_, out := post(sid, fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":"echo","arguments":{"text":"e%d"}}}`, j, j))
				if !strings.Contains(out, fmt.Sprintf(`"id":%d,`, j)) || !strings.Contains(out, fmt.Sprintf(`"e%d"`, j)) {
					t.Errorf("echo %d: %s", j, out)
				}
			}()
		}
		if _, out := post(sid, `{"jsonrpc":"2.0","id":99,"method":"tools/call","params":{"name":"write_file","arguments":{}}}`); !strings.Contains(out, "-32602") {
			t.Errorf("the denied tool over HTTP: %s", out)
		}
		calls.Wait()
	}
	var wg sync.WaitGroup
	for range 3 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			session()
		}()
	}
	wg.Wait()
	cancel()
	select {
	case err := <-served:
		if err != nil {
			t.Errorf("ServeHTTP: %v", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("ServeHTTP did not return after ctx ended")
	}
}

// TestSessionRouteProgress: a progress notification goes on the POST
// stream of the request whose _meta.progressToken it names, ahead of the
// response that ends that stream, even with a GET stream open; on the GET
// stream a client may read it after the response, when it no longer
// listens (the conformance suite's tools-call-with-progress failed that
// way through the relay). Control: a notification with no token, or a
// token no request asked for, still goes on the GET stream.
func TestSessionRouteProgress(t *testing.T) {
	s := &httpSession{log: slog.New(slog.DiscardHandler), waiting: map[string]*sseStream{},
		done: make(chan struct{}), maxPending: 4, maxLine: 1 << 20}
	req := func(line string) envelope {
		e, err := parseEnvelope([]byte(line))
		if err != nil {
			t.Fatal(err)
		}
		return e
	}
	s.get = newStream("")
	other := newStream("n:1")
	other.progress = progressKey(req(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"a"}}`), "_meta")
	post := newStream("n:2")
	post.progress = progressKey(req(`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"b","_meta":{"progressToken":"t\u0031"}}}`), "_meta")
	s.posts = []*sseStream{other, post}
	got := make(chan *sseStream, 3)
	stop := make(chan struct{})
	defer close(stop)
	for _, st := range []*sseStream{s.get, other, post} {
		go func() {
			for {
				select {
				case <-st.msgs:
					got <- st
				case <-stop:
					return
				}
			}
		}()
	}
	for _, tc := range []struct {
		line string
		want *sseStream
	}{
		{`{"jsonrpc":"2.0","method":"notifications/progress","params":{"progressToken":"t1","progress":1}}`, post},
		{`{"jsonrpc":"2.0","method":"notifications/progress","params":{"progressToken":"t9","progress":1}}`, s.get},
		{`{"jsonrpc":"2.0","method":"notifications/message","params":{"level":"info","data":"x"}}`, s.get},
	} {
		s.route([]byte(tc.line))
		select {
		case st := <-got:
			if st != tc.want {
				t.Errorf("%s went on stream %q (progress %q), want %q", tc.line, st.idKey, st.progress, tc.want.idKey)
			}
		case <-time.After(5 * time.Second):
			t.Fatalf("%s reached no stream", tc.line)
		}
	}
}
