package llm

import (
	"encoding/json"
	"io"
	"net/http"
	"reflect"
	"strings"
	"testing"

	"github.com/sandbox-run/sandbox-run/policy"
	"github.com/sandbox-run/sandbox-run/proxy"
)

func TestLLMHosts(t *testing.T) {
	for _, c := range []struct {
		p    policy.Policy
		want []string
	}{
		{policy.Policy{LLMKeyEnv: "OPENAI_API_KEY"}, []string{"api.openai.com:443"}},
		{policy.Policy{LLMKeyEnv: "ANTHROPIC_API_KEY", LLMSocket: "/run/llm.sock"}, nil}, // the relay audits
		{policy.Policy{Secrets: []policy.Secret{{Name: "OPENAI_API_KEY", Hosts: []string{"Api.Example.com", "llm.internal:8443"}},
			{Name: "GH", Hosts: []string{"api.github.com"}}}}, []string{"api.example.com:443", "llm.internal:8443"}},
		{policy.Policy{Secrets: []policy.Secret{{Name: "GH", Hosts: []string{"api.github.com"}}}}, nil},
	} {
		if got := Hosts(c.p); !reflect.DeepEqual(got, c.want) {
			t.Errorf("Hosts(%+v) = %q, want %q", c.p, got, c.want)
		}
	}
}

// TestLLMMeterEgress: the proxy's hooks, as WithMeter wraps them, write
// one llm_request line per request to an LLM host once its response has
// been read, with the model, the status and the tokens of a Responses API
// stream (usage under "response") and of a JSON answer; the prompt and
// the Authorization header are not in it. A request to another host, and
// one the inner hook refuses, get none. Control: without the wrapping no
// line is written.
func TestLLMMeterEgress(t *testing.T) {
	audit := &syncBuf{}
	refuse := errString("refused by the secret hook")
	inner := func(r *http.Request, _ string) error {
		if r.Header.Get("X-Refuse") != "" {
			return refuse
		}
		return nil
	}
	cfg := WithMeter(proxy.Config{Audit: audit, RequestHook: inner}, []string{"api.openai.com:443"}, "run1")
	exchange := func(cfg proxy.Config, host, body, ctype, answer string, refused bool) {
		t.Helper()
		r, _ := http.NewRequest("POST", "https://"+host+"/v1/responses?key=QUERY-KEY", strings.NewReader(body))
		r.Header.Set("Authorization", "Bearer sk-REAL-KEY")
		if refused {
			r.Header.Set("X-Refuse", "1")
		}
		if err := cfg.RequestHook(r, "api.openai.com"); err != nil {
			if !refused {
				t.Fatal(err)
			}
			return
		}
		if cfg.ResponseHook != nil && r.URL.Host == "api.openai.com:443" && r.Header.Get("Accept-Encoding") != "identity" {
			t.Errorf("the LLM request asks for %q; want the response uncompressed", r.Header.Get("Accept-Encoding"))
		}
		if got, _ := io.ReadAll(r.Body); string(got) != body {
			t.Fatalf("the body forwarded is %q, want %q", got, body)
		}
		resp := &http.Response{StatusCode: 200, Header: http.Header{"Content-Type": {ctype}}, Body: io.NopCloser(strings.NewReader(answer)), Request: r}
		if cfg.ResponseHook != nil {
			if err := cfg.ResponseHook(resp); err != nil {
				t.Fatal(err)
			}
		}
		if got, _ := io.ReadAll(resp.Body); string(got) != answer {
			t.Fatalf("the answer passed on is %q, want %q", got, answer)
		}
		resp.Body.Close()
	}
	sse := "event: response.created\ndata: {\"type\":\"response.created\",\"response\":{\"id\":\"r1\"}}\n\n" +
		"event: response.completed\ndata: {\"type\":\"response.completed\",\"response\":{\"id\":\"r1\",\"usage\":{\"input_tokens\":321,\"output_tokens\":9,\"total_tokens\":330}}}\n\n"
	exchange(cfg, "api.openai.com:443", `{"model":"gpt-x","input":"PROMPT-TEXT","stream":true}`, "text/event-stream", sse, false)
	exchange(cfg, "api.openai.com:443", `{"model":"gpt-y","input":"PROMPT-TEXT"}`, "application/json", `{"usage":{"input_tokens":7,"output_tokens":3}}`, false)
	exchange(cfg, "api.github.com:443", `{"model":"no"}`, "application/json", `{"usage":{"input_tokens":1,"output_tokens":1}}`, false)
	exchange(cfg, "api.openai.com:443", `{"model":"refused"}`, "application/json", `{}`, true)

	text := audit.String()
	lines := strings.Split(strings.TrimSpace(text), "\n")
	if len(lines) != 2 || strings.Contains(text, "PROMPT-TEXT") || strings.Contains(text, "REAL-KEY") || strings.Contains(text, "QUERY-KEY") {
		t.Fatalf("want two llm_request lines without the prompt, the key or the query:\n%s", text)
	}
	want := []map[string]any{
		{"event": "llm_request", "method": "POST", "host": "api.openai.com:443", "path": "/v1/responses", "status": 200.0, "model": "gpt-x", "input_tokens": 321.0, "output_tokens": 9.0},
		{"event": "llm_request", "status": 200.0, "model": "gpt-y", "input_tokens": 7.0, "output_tokens": 3.0},
	}
	for i, l := range lines {
		var m map[string]any
		if err := json.Unmarshal([]byte(l), &m); err != nil {
			t.Fatal(err)
		}
		for k, v := range want[i] {
			if m[k] != v {
				t.Errorf("line %d: %s = %v, want %v (%s)", i, k, m[k], v, l)
			}
		}
	}

	// Control: the same exchange through the unwrapped hooks writes nothing.
	bare := &syncBuf{}
	exchange(proxy.Config{Audit: bare, RequestHook: inner}, "api.openai.com:443", `{"model":"gpt-x"}`, "text/event-stream", sse, false)
	if bare.String() != "" || WithMeter(proxy.Config{Audit: bare}, nil, "run1").RequestHook != nil {
		t.Fatalf("without the meter: %q", bare.String())
	}
}

type errString string

func (e errString) Error() string { return string(e) }
