package e2e

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
)

// fakeMessagesAPI is a stand-in for Anthropic's Messages API on loopback:
// to a request that offers the Bash tool and holds no tool result yet it
// answers with one tool_use of Bash running command; after that, and to
// every other request (Claude Code's side requests), with a short text.
// Streaming requests get server-sent events as the real API sends them.
type fakeMessagesAPI struct {
	*httptest.Server
	command string
	mu      sync.Mutex
	toolUse int // tool_use answers given
	results []string
}

func newFakeMessagesAPI(t *testing.T, command string) *fakeMessagesAPI {
	f := &fakeMessagesAPI{command: command}
	f.Server = httptest.NewServer(http.HandlerFunc(f.serve))
	t.Cleanup(f.Close)
	return f
}

type fakeRequest struct {
	Stream bool `json:"stream"`
	Tools  []struct {
		Name string `json:"name"`
	} `json:"tools"`
	Messages []struct {
		Content json.RawMessage `json:"content"`
	} `json:"messages"`
}

func (f *fakeMessagesAPI) serve(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost || !strings.HasPrefix(r.URL.Path, "/v1/messages") {
		http.NotFound(w, r)
		return
	}
	body, _ := io.ReadAll(io.LimitReader(r.Body, 64<<20))
	if strings.HasSuffix(r.URL.Path, "/count_tokens") {
		fmt.Fprint(w, `{"input_tokens": 10}`)
		return
	}
	var req fakeRequest
	if err := json.Unmarshal(body, &req); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	hasBash, hasResult := false, false
	for _, tl := range req.Tools {
		hasBash = hasBash || tl.Name == "Bash"
	}
	for _, m := range req.Messages {
		if strings.Contains(string(m.Content), `"tool_result"`) {
			hasResult = true
			f.mu.Lock()
			f.results = append(f.results, string(m.Content))
			f.mu.Unlock()
		}
	}
	f.mu.Lock()
	useTool := hasBash && !hasResult && f.toolUse == 0
	if useTool {
		f.toolUse++
	}
	f.mu.Unlock()
	block, stop := map[string]any{"type": "text", "text": "All done."}, "end_turn"
	if useTool {
		block = map[string]any{"type": "tool_use", "id": "toolu_01sandboxrun", "name": "Bash",
			"input": map[string]any{"command": f.command, "description": "Write two files"}}
		stop = "tool_use"
	}
	if req.Stream {
		f.stream(w, block, stop)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(message(block, stop))
}

func message(block map[string]any, stop string) map[string]any {
	content := []any{}
	if block != nil {
		content = append(content, block)
	}
	return map[string]any{"id": "msg_01sandboxrun", "type": "message", "role": "assistant", "model": "claude-sonnet-4-5",
		"content": content, "stop_reason": stop, "stop_sequence": nil,
		"usage": map[string]any{"input_tokens": 10, "output_tokens": 5}}
}

// stream writes the answer as the API's events: message_start, one
// content block (start, delta, stop), message_delta, message_stop.
func (f *fakeMessagesAPI) stream(w http.ResponseWriter, block map[string]any, stop string) {
	w.Header().Set("Content-Type", "text/event-stream")
	start := message(nil, "")
	start["stop_reason"] = nil
	ev := func(name string, data any) {
		b, _ := json.Marshal(data)
		fmt.Fprintf(w, "event: %s\ndata: %s\n\n", name, b)
	}
	ev("message_start", map[string]any{"type": "message_start", "message": start})
	var first, delta map[string]any
	if block["type"] == "tool_use" {
		in, _ := json.Marshal(block["input"])
		first = map[string]any{"type": "tool_use", "id": block["id"], "name": block["name"], "input": map[string]any{}}
		delta = map[string]any{"type": "input_json_delta", "partial_json": string(in)}
	} else {
		first = map[string]any{"type": "text", "text": ""}
		delta = map[string]any{"type": "text_delta", "text": block["text"]}
	}
	ev("content_block_start", map[string]any{"type": "content_block_start", "index": 0, "content_block": first})
	ev("content_block_delta", map[string]any{"type": "content_block_delta", "index": 0, "delta": delta})
	ev("content_block_stop", map[string]any{"type": "content_block_stop", "index": 0})
	ev("message_delta", map[string]any{"type": "message_delta", "delta": map[string]any{"stop_reason": stop, "stop_sequence": nil},
		"usage": map[string]any{"output_tokens": 5}})
	ev("message_stop", map[string]any{"type": "message_stop"})
}

// toolUses is how many tool_use answers the fake gave.
func (f *fakeMessagesAPI) toolUses() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.toolUse
}
