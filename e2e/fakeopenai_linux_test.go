package e2e

import (
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
)

// fakeResponsesAPI stands in for OpenAI's Responses API (POST
// /v1/responses, answered with server-sent events as the real API streams
// them: response.created, one assistant message, response.completed with
// usage). It answers only a request whose Authorization is "Bearer " +
// key; any other gets the API's 401 invalid_api_key. It records each
// request's path and Authorization, and whether its body held prompt.
type fakeResponsesAPI struct {
	key, prompt string

	mu   sync.Mutex
	seen []fakeOpenAIRequest
}

type fakeOpenAIRequest struct {
	Method, Path, Authorization string
	Prompt                      bool // the body held the prompt
}

// fakeAnswer is the assistant's text, and the usage the fake reports.
const (
	fakeAnswer        = "Hi from the fake Responses API."
	fakeInputTokens   = 321
	fakeOutputTokens  = 9
	fakeResponseModel = "gpt-sbx-test"
)

func (f *fakeResponsesAPI) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(io.LimitReader(r.Body, 64<<20))
	auth := r.Header.Get("Authorization")
	f.mu.Lock()
	f.seen = append(f.seen, fakeOpenAIRequest{r.Method, r.URL.Path, auth, strings.Contains(string(body), f.prompt)})
	f.mu.Unlock()
	if auth != "Bearer "+f.key {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusUnauthorized)
		fmt.Fprint(w, `{"error":{"message":"Incorrect API key provided.","type":"invalid_request_error","param":null,"code":"invalid_api_key"}}`)
		return
	}
	if r.Method != http.MethodPost || !strings.HasSuffix(r.URL.Path, "/responses") {
		http.NotFound(w, r)
		return
	}
	w.Header().Set("Content-Type", "text/event-stream")
	ev := func(name, data string) {
		fmt.Fprintf(w, "event: %s\ndata: %s\n\n", name, data)
		if fl, ok := w.(http.Flusher); ok {
			fl.Flush()
		}
	}
	ev("response.created", `{"type":"response.created","response":{"id":"resp_sbx1","object":"response","status":"in_progress","model":"`+fakeResponseModel+`"}}`)
	ev("response.output_item.done", `{"type":"response.output_item.done","output_index":0,"item":{"type":"message","id":"msg_sbx1","status":"completed","role":"assistant","content":[{"type":"output_text","text":"`+fakeAnswer+`","annotations":[]}]}}`)
	ev("response.completed", fmt.Sprintf(`{"type":"response.completed","response":{"id":"resp_sbx1","object":"response","status":"completed","model":"%s",`+
		`"usage":{"input_tokens":%d,"input_tokens_details":{"cached_tokens":0},"output_tokens":%d,"output_tokens_details":{"reasoning_tokens":0},"total_tokens":%d}}}`,
		fakeResponseModel, fakeInputTokens, fakeOutputTokens, fakeInputTokens+fakeOutputTokens))
}

func (f *fakeResponsesAPI) requests() []fakeOpenAIRequest {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]fakeOpenAIRequest(nil), f.seen...)
}
