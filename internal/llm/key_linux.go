package llm

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"strings"
	"time"

	"github.com/sandbox-run/sandbox-run/proxy/secret"
)

// Key is the LLM relay's part of --llm-key-env: the run's secrets and
// the name of the provider key among them. The zero value adds no key and
// meters nothing.
type Key struct {
	Set  *secret.Set
	Name string
}

// llmChannelHost is the host name the relay judges requests by: no secret
// is bound to it, so any placeholder but the key's is refused there.
const llmChannelHost = "llm-channel.sandbox-run.invalid"

// refuse answers, and returns the audit line of, a request that carries
// the placeholder of a secret other than the key (bound to other hosts);
// nil when the request may go on.
func (k Key) refuse(w http.ResponseWriter, r *http.Request) map[string]any {
	if k.Set == nil {
		return nil
	}
	probe := r.Clone(r.Context())
	probe.Header = r.Header.Clone()
	k.Set.SwapHeaders(probe.Header, k.Name) // the key's own placeholder is for here
	d := k.Set.Apply(probe, llmChannelHost, true)
	if d.Refused == nil {
		r.Body = probe.Body // Apply may have read it, and put it back there
		return nil
	}
	w.Header().Set("X-Sandbox-Refusal", d.Refused.Reason)
	http.Error(w, "sandbox-run: "+d.Refused.Error(), d.Refused.Status())
	return map[string]any{"method": r.Method, "path": r.URL.Path, "status": d.Refused.Status(),
		"decision": "refuse", "reason": d.Refused.Reason, "secret": d.Refused.Name}
}

// put swaps the key's placeholder for the key in out's headers; a request
// that carries none gets the key in the provider's header (x-api-key for
// Anthropic's API, Authorization: Bearer otherwise). The response is
// asked uncompressed, so that its usage can be read and an echoed key
// scrubbed.
func (k Key) put(out *http.Request) {
	if k.Set == nil {
		return
	}
	out.Header.Set("Accept-Encoding", "identity")
	if k.Set.SwapHeaders(out.Header, k.Name) {
		return
	}
	k.Set.Value(k.Name, func(real string) {
		if out.Header.Get("Anthropic-Version") != "" || strings.HasPrefix(k.Name, "ANTHROPIC") {
			out.Header.Set("X-Api-Key", real)
		} else {
			out.Header.Set("Authorization", "Bearer "+real)
		}
	})
}

// scrub keeps the key out of what comes back (an upstream that echoes
// it), and has the response's usage read as it passes.
func (k Key) scrub(resp *http.Response) error {
	if k.Set == nil {
		return nil
	}
	k.Set.ScrubResponse(resp)
	if m, ok := resp.Request.Context().Value(llmMeterKey{}).(*llmMeter); ok && resp.Body != nil {
		sse := strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream")
		resp.Body = meterBody(resp.Body, sse, &m.usage)
	}
	return nil
}

// meter reads the model r names and arranges for the response's usage to
// be read; nil (fields adds nothing) without a key.
func (k Key) meter(r *http.Request) *llmMeter {
	if k.Set == nil {
		return nil
	}
	return startMeter(r)
}

// startMeter reads the model r names (peeking at most maxLLMPeek of its
// body, which stays readable from the start) and puts a meter for its
// response's usage in r's context.
func startMeter(r *http.Request) *llmMeter {
	m := &llmMeter{start: time.Now()}
	if r.Body != nil && r.Body != http.NoBody {
		head, _ := io.ReadAll(io.LimitReader(r.Body, maxLLMPeek))
		m.model = modelOf(head)
		r.Body = struct {
			io.Reader
			io.Closer
		}{io.MultiReader(bytes.NewReader(head), r.Body), r.Body}
	}
	*r = *r.WithContext(context.WithValue(r.Context(), llmMeterKey{}, m))
	return m
}

type llmMeterKey struct{}

// llmMeter is one request's model and its response's usage.
type llmMeter struct {
	model string
	start time.Time
	usage usageMeter
}

func (m *llmMeter) fields(f map[string]any) {
	if m == nil {
		return
	}
	if m.model != "" {
		f["model"] = m.model
	}
	m.usage.fields(f)
}
