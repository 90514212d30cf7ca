package llm

import (
	"bufio"
	"bytes"
	"encoding/json"
	"io"
	"strings"
	"sync"
)

// maxLLMPeek bounds what the LLM relay keeps of a request body (to read
// its model) and of a JSON response (to read its usage); a longer one
// goes on whole, and only what the kept part says is audited.
const maxLLMPeek = 1 << 20

// modelOf returns the top-level "model" string of the JSON object that b
// begins (b may be cut short), or "".
func modelOf(b []byte) string {
	dec := json.NewDecoder(bytes.NewReader(b))
	if t, err := dec.Token(); err != nil || t != json.Delim('{') {
		return ""
	}
	for dec.More() {
		k, err := dec.Token()
		if err != nil {
			return ""
		}
		if k == "model" {
			var m string
			if dec.Decode(&m) != nil {
				return ""
			}
			return m
		}
		var skip json.RawMessage
		if dec.Decode(&skip) != nil {
			return ""
		}
	}
	return ""
}

// tokenUsage is a response's usage object, in Anthropic's names and in
// OpenAI's.
type tokenUsage struct {
	InputTokens      *int64 `json:"input_tokens"`
	OutputTokens     *int64 `json:"output_tokens"`
	PromptTokens     *int64 `json:"prompt_tokens"`
	CompletionTokens *int64 `json:"completion_tokens"`
}

// usageEvent is the part of a response body, or of one server-sent
// event's data, that carries usage: at the top, under "message"
// (Anthropic's message_start) or under "response" (the Responses API's
// response.completed).
type usageEvent struct {
	Usage   *tokenUsage `json:"usage"`
	Message *struct {
		Usage *tokenUsage `json:"usage"`
	} `json:"message"`
	Response *struct {
		Usage *tokenUsage `json:"usage"`
	} `json:"response"`
}

// usageMeter adds up what the responses it reads report. Counts only grow:
// a stream reports running totals, and the largest is the total.
type usageMeter struct {
	mu            sync.Mutex
	input, output int64
	seen          bool
}

func (m *usageMeter) add(u *tokenUsage) {
	if u == nil {
		return
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, c := range []struct {
		v   *int64
		dst *int64
	}{{u.InputTokens, &m.input}, {u.PromptTokens, &m.input}, {u.OutputTokens, &m.output}, {u.CompletionTokens, &m.output}} {
		if c.v != nil {
			m.seen = true
			*c.dst = max(*c.dst, *c.v)
		}
	}
}

// event reads the usage of one JSON document.
func (m *usageMeter) event(b []byte) {
	var e usageEvent
	if json.Unmarshal(b, &e) != nil {
		return
	}
	m.add(e.Usage)
	if e.Message != nil {
		m.add(e.Message.Usage)
	}
	if e.Response != nil {
		m.add(e.Response.Usage)
	}
}

// fields are the audit fields: input_tokens and output_tokens when a
// response said so, nothing otherwise.
func (m *usageMeter) fields(f map[string]any) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.seen {
		f["input_tokens"], f["output_tokens"] = m.input, m.output
	}
}

// meterBody returns body, read through m: as server-sent events line by
// line when sse, else kept up to maxLLMPeek and read whole at EOF.
func meterBody(body io.ReadCloser, sse bool, m *usageMeter) io.ReadCloser {
	pr, pw := io.Pipe()
	done := make(chan struct{})
	go func() {
		defer close(done)
		if sse {
			sc := bufio.NewScanner(pr)
			sc.Buffer(make([]byte, 64<<10), maxLLMPeek)
			for sc.Scan() {
				if d, ok := strings.CutPrefix(sc.Text(), "data:"); ok {
					m.event([]byte(strings.TrimSpace(d)))
				}
			}
		} else if b, _ := io.ReadAll(io.LimitReader(pr, maxLLMPeek+1)); len(b) <= maxLLMPeek {
			m.event(b)
		}
		io.Copy(io.Discard, pr) // past a line or body too long: keep the tee flowing
	}()
	return &meteredBody{Reader: io.TeeReader(body, pw), body: body, pw: pw, done: done}
}

type meteredBody struct {
	io.Reader
	body io.ReadCloser
	pw   *io.PipeWriter
	done chan struct{}
	once sync.Once
}

// Read passes the body on; at its end the meter has read everything.
func (b *meteredBody) Read(p []byte) (int, error) {
	n, err := b.Reader.Read(p)
	if err != nil {
		b.finish()
	}
	return n, err
}

func (b *meteredBody) finish() {
	b.once.Do(func() {
		b.pw.Close()
		<-b.done
	})
}

func (b *meteredBody) Close() error {
	err := b.body.Close()
	b.finish()
	return err
}
