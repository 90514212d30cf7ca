package llm

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/sandbox-run/sandbox-run/proxy/secret"
)

const llmReal = "sk-ant-api03-REALkey0123456789abcdefghijklmnopqrstuv"

// fakeLLM is a fake provider API on a Unix socket (the node's LLM proxy
// side of the channel): it records the key headers it receives and
// answers JSON or, for "stream": true, server-sent events with usage.
type fakeLLM struct {
	mu   sync.Mutex
	keys []string // x-api-key + "|" + Authorization, per request
}

func (f *fakeLLM) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	f.mu.Lock()
	f.keys = append(f.keys, r.Header.Get("X-Api-Key")+"|"+r.Header.Get("Authorization"))
	f.mu.Unlock()
	body, _ := io.ReadAll(r.Body)
	if bytes.Contains(body, []byte(`"stream":true`)) {
		w.Header().Set("Content-Type", "text/event-stream")
		fmt.Fprint(w, "event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"usage\":{\"input_tokens\":25,\"output_tokens\":1}}}\n\n")
		w.(http.Flusher).Flush()
		fmt.Fprint(w, "event: message_delta\ndata: {\"type\":\"message_delta\",\"usage\":{\"output_tokens\":17}}\n\n")
		return
	}
	w.Header().Set("Content-Type", "application/json")
	// An upstream that echoes the key it got: the relay scrubs it.
	fmt.Fprintf(w, `{"echo":%q,"usage":{"input_tokens":7,"output_tokens":3}}`, r.Header.Get("X-Api-Key"))
}

func (f *fakeLLM) got() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]string(nil), f.keys...)
}

// startLLMRelay serves Serve with key on a loopback port in front of a
// fakeLLM; it returns the relay's URL, the fake and the audit buffer.
func startLLMRelay(t *testing.T, key Key) (string, *fakeLLM, *syncBuf) {
	t.Helper()
	sock := filepath.Join(t.TempDir(), "llm.sock")
	uln, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	fake := &fakeLLM{}
	srv := &http.Server{Handler: fake}
	go srv.Serve(uln)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	audit := &syncBuf{}
	done := make(chan struct{})
	go func() { defer close(done); Serve(ctx, ln, sock, "run1", audit, slog.New(slog.DiscardHandler), key) }()
	t.Cleanup(func() { cancel(); <-done; srv.Close() })
	return "http://" + ln.Addr().String(), fake, audit
}

type syncBuf struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuf) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuf) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

func post(t *testing.T, url string, hdr map[string]string, body string) (int, string) {
	t.Helper()
	req, _ := http.NewRequest("POST", url+"/v1/messages", strings.NewReader(body))
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// TestLLMKeyRelay: with --llm-key-env the provider sees the real key
// where the client sent the placeholder (or nothing), the client never
// sees it (an echo is scrubbed), the audit names the model and the tokens
// (JSON and SSE) and neither the key nor the prompt; another secret's
// placeholder is refused at the channel. Control: without the key the
// provider sees what the client sent.
func TestLLMKeyRelay(t *testing.T) {
	set, err := secret.New([]secret.Spec{{Name: "ANTHROPIC_API_KEY", Value: llmReal},
		{Name: "GH", Value: "ghp_REALgh0123456789abcdefghijklmnopqrs", Hosts: []string{"api.github.com"}}})
	if err != nil {
		t.Fatal(err)
	}
	ph, _ := set.Placeholder("ANTHROPIC_API_KEY")
	gh, _ := set.Placeholder("GH")
	url, fake, audit := startLLMRelay(t, Key{set, "ANTHROPIC_API_KEY"})
	prompt := "SECRET-PROMPT-TEXT"
	status, body := post(t, url, map[string]string{"X-Api-Key": ph, "Anthropic-Version": "2023-06-01"}, `{"model":"claude-x","messages":[{"content":"`+prompt+`"}]}`)
	if status != 200 || strings.Contains(body, llmReal) || !strings.Contains(body, ph) {
		t.Fatalf("response %d %s: want the echo scrubbed to the placeholder", status, body)
	}
	post(t, url, map[string]string{"Anthropic-Version": "2023-06-01"}, `{"model":"claude-y","stream":true,"messages":[]}`)
	status, _ = post(t, url, map[string]string{"X-Api-Key": ph, "X-Other": gh}, `{"model":"claude-z"}`)
	if status != http.StatusForbidden {
		t.Fatalf("another secret's placeholder at the LLM channel: status %d, want 403", status)
	}
	got := fake.got()
	if len(got) != 2 || got[0] != llmReal+"|" || got[1] != llmReal+"|" {
		t.Fatalf("provider saw keys %q; want the real key twice (swapped, then added) and the refused request never", got)
	}
	lines := strings.Split(strings.TrimSpace(audit.String()), "\n")
	if strings.Contains(audit.String(), llmReal) || strings.Contains(audit.String(), prompt) || len(lines) != 3 {
		t.Fatalf("audit holds the key or the prompt, or not one line per request:\n%s", audit.String())
	}
	want := []map[string]any{
		{"model": "claude-x", "input_tokens": 7.0, "output_tokens": 3.0, "status": 200.0},
		{"model": "claude-y", "input_tokens": 25.0, "output_tokens": 17.0, "status": 200.0},
		{"status": 403.0, "secret": "GH", "reason": secret.ReasonElsewhere},
	}
	for i, l := range lines {
		var m map[string]any
		if err := json.Unmarshal([]byte(l), &m); err != nil {
			t.Fatal(err)
		}
		for k, v := range want[i] {
			if m[k] != v {
				t.Errorf("audit line %d: %s = %v, want %v (%s)", i, k, m[k], v, l)
			}
		}
	}

	// Control: without a key the relay adds none.
	url2, fake2, _ := startLLMRelay(t, Key{})
	post(t, url2, map[string]string{"X-Api-Key": ph}, `{"model":"m"}`)
	post(t, url2, nil, `{"model":"m"}`)
	if g := fake2.got(); len(g) != 2 || g[0] != ph+"|" || g[1] != "|" {
		t.Fatalf("without the key the provider saw %q; want the placeholder as sent, then nothing", g)
	}
}

func TestModelOf(t *testing.T) {
	for in, want := range map[string]string{
		`{"model":"a"}`: "a",
		`{"messages":[{"model":"no"}],"model":"b"}`: "b",
		`{"max_tokens":5,"model":"c","x":`:          "c",
		`{"messages":[1,2`:                          "",
		`["model","d"]`:                             "",
		``:                                          "",
	} {
		if got := modelOf([]byte(in)); got != want {
			t.Errorf("modelOf(%s) = %q, want %q", in, got, want)
		}
	}
}
