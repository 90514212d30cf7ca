package mcp

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"io"
	"log/slog"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/sandbox-run/sandbox-run/policy"
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
	if NewToken() == NewToken() {
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
