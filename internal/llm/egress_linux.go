package llm

import (
	"io"
	"net"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/sandbox-run/sandbox-run/internal/audit"
	"github.com/sandbox-run/sandbox-run/policy"
	"github.com/sandbox-run/sandbox-run/proxy"
)

// Hosts are the host:port targets whose requests are an LLM provider's
// when the provider key is swapped in by the egress proxy: the provider
// host of --llm-key-env without an LLM socket, and the hosts of a --secret
// named after a provider key sandbox-run knows (OPENAI_API_KEY@HOST).
// With an LLM socket the LLM relay audits the key's requests instead.
func Hosts(p policy.Policy) []string {
	var out []string
	add := func(hosts ...string) {
		for _, h := range hosts {
			h = strings.ToLower(strings.TrimSuffix(h, "."))
			if _, _, err := net.SplitHostPort(h); err != nil {
				h = net.JoinHostPort(h, "443")
			}
			if !slices.Contains(out, h) {
				out = append(out, h)
			}
		}
	}
	if h, ok := policy.LLMProviderHost(p.LLMKeyEnv); ok && p.LLMSocket == "" {
		add(h)
	}
	for _, s := range p.Secrets {
		if _, ok := policy.LLMProviderHost(s.Name); ok {
			add(s.Hosts...)
		}
	}
	return out
}

// WithMeter has the proxy of cfg write one "llm_request" audit line per
// terminated request to hosts (Hosts), after the request hooks of cfg
// allowed it and once its response has been read to the end or closed:
// the method, the host, the path, the upstream's status, the model the
// request's body names, the tokens the response reports (JSON or
// server-sent events, asked uncompressed; none when it reports none) and
// the duration. Never a header, the query, or a body beyond those fields:
// the key and the prompt are not recorded. A request refused before its upstream answered
// has only the proxy's own lines. cfg is returned as it is without hosts
// or an audit.
func WithMeter(cfg proxy.Config, hosts []string, runID string) proxy.Config {
	if len(hosts) == 0 || cfg.Audit == nil {
		return cfg
	}
	aw := cfg.Audit
	reqHook, respHook := cfg.RequestHook, cfg.ResponseHook
	cfg.RequestHook = func(r *http.Request, host string) error {
		if reqHook != nil {
			if err := reqHook(r, host); err != nil {
				return err
			}
		}
		if slices.Contains(hosts, strings.ToLower(r.URL.Host)) {
			r.Header.Set("Accept-Encoding", "identity") // usage is read from the response as it passes
			startMeter(r)
		}
		return nil
	}
	cfg.ResponseHook = func(resp *http.Response) error {
		if respHook != nil {
			if err := respHook(resp); err != nil {
				return err
			}
		}
		m, ok := resp.Request.Context().Value(llmMeterKey{}).(*llmMeter)
		if !ok || resp.Body == nil {
			return nil
		}
		sse := strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream")
		method, host, path, status := resp.Request.Method, resp.Request.URL.Host, resp.Request.URL.EscapedPath(), resp.StatusCode
		resp.Body = &doneBody{ReadCloser: meterBody(resp.Body, sse, &m.usage), done: func() {
			f := map[string]any{"method": method, "host": host, "path": path, "status": status,
				"duration_ms": time.Since(m.start).Milliseconds()}
			m.fields(f)
			audit.Event(aw, runID, "llm_request", f)
		}}
		return nil
	}
	return cfg
}

// doneBody calls done once, when the body has been read to its end (or
// failed) or is closed, whichever comes first.
type doneBody struct {
	io.ReadCloser
	done func()
	once sync.Once
}

func (b *doneBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	if err != nil {
		b.once.Do(b.done)
	}
	return n, err
}

func (b *doneBody) Close() error {
	err := b.ReadCloser.Close()
	b.once.Do(b.done)
	return err
}
