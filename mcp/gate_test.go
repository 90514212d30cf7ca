package mcp

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"runtime"
	"runtime/debug"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// rpcReply is what the client gets back.
type rpcReply struct {
	ID     json.RawMessage `json:"id"`
	Result json.RawMessage `json:"result"`
	Error  *struct {
		Code    int    `json:"code"`
		Message string `json:"message"`
	} `json:"error"`
}

func reply(t *testing.T, line string) rpcReply {
	t.Helper()
	var r rpcReply
	if err := json.Unmarshal([]byte(line), &r); err != nil {
		t.Fatalf("client got %q: %v", line, err)
	}
	return r
}

// marker sends an allowed request and says whether it is the next thing
// the server reads: whatever was sent before it did not reach the server.
func (s *rawSession) marker(t *testing.T) {
	t.Helper()
	s.client(`{"jsonrpc":"2.0","id":"marker","method":"ping"}`)
	if got := s.atServer(); !strings.Contains(got, `"method":"ping"`) {
		t.Fatalf("the server got %s before the marker: a refused request reached it", got)
	}
	s.answer(`{}`)
	if got := s.atClient(); !strings.Contains(got, `"marker"`) {
		t.Fatalf("client got %s, want the marker's answer", got)
	}
}

// answer answers, as the server, the request the server read last.
func (s *rawSession) answer(result string) {
	s.t.Helper()
	var e struct{ ID json.RawMessage }
	if err := json.Unmarshal([]byte(s.lastSrv), &e); err != nil || e.ID == nil {
		s.t.Fatalf("the server's last line %q has no id", s.lastSrv)
	}
	s.server(`{"jsonrpc":"2.0","id":` + string(e.ID) + `,"result":` + result + `}`)
}

// TestRelayMalformedNames: a request naming its tool, prompt or resource
// other than with a string never reaches the server, whatever the rules;
// the client gets -32602 under its id and the audit keeps what was sent.
// Control: the same requests with a string name reach the server.
func TestRelayMalformedNames(t *testing.T) {
	type req struct{ method, member string }
	reqs := []req{{"tools/call", "name"}, {"prompts/get", "name"}, {"resources/read", "uri"},
		{"resources/subscribe", "uri"}, {"resources/unsubscribe", "uri"}}
	values := []string{`["write_file"]`, `null`, `123`, `{"name":"write_file"}`, `true`, ``}
	for _, rules := range []Rules{{}, {Deny: []string{"write_file"}}} {
		s := newRaw(t, rules)
		n := 0
		for _, r := range reqs {
			for _, v := range values {
				n++
				params := `{"` + r.member + `":` + v + `}`
				if v == "" {
					params = `{"arguments":{}}`
				}
				s.client(fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":%q,"params":%s}`, n, r.method, params))
				got := reply(t, s.atClient())
				if got.Error == nil || got.Error.Code != -32602 || string(got.ID) != fmt.Sprint(n) {
					t.Errorf("%s %s: client got %+v, want -32602 under id %d", r.method, params, got, n)
				}
			}
		}
		s.marker(t)
		recs := s.audit.records(t)
		if len(recs) < n {
			t.Fatalf("%d records for %d refusals", len(recs), n)
		}
		for i, rec := range recs[:n] {
			v := values[i%len(values)]
			wantSent := v
			if v == "" {
				wantSent = ""
			}
			if rec.Outcome != outcomeRefused || rec.NameSent != wantSent || !strings.HasPrefix(rec.Rule, "malformed:") {
				t.Errorf("record %d: %+v, want refused with name_sent %q", i, rec, wantSent)
			}
		}
	}
	// Control: a string name reaches the server.
	s := newRaw(t, Rules{})
	for _, r := range reqs {
		l := fmt.Sprintf(`{"jsonrpc":"2.0","id":1,"method":%q,"params":{%q:"write_file"}}`, r.method, r.member)
		s.client(l)
		if got := s.atServer(); !strings.Contains(got, r.method) {
			t.Fatalf("control: server got %s", got)
		}
		s.answer(`{}`)
		s.atClient()
	}
}

func TestRelayIDs(t *testing.T) {
	t.Run("a pending id is refused, its list still filtered", func(t *testing.T) {
		s := newRaw(t, Rules{Deny: []string{"secret"}})
		s.client(`{"jsonrpc":"2.0","id":1,"method":"tools/list"}`)
		s.atServer()
		s.client(`{"jsonrpc":"2.0","id":1,"method":"ping"}`)
		if got := reply(t, s.atClient()); got.Error == nil || got.Error.Code != -32600 || !strings.Contains(got.Error.Message, "already pending") {
			t.Fatalf("reused id: %+v", got)
		}
		s.client(`{"jsonrpc":"2.0","id":1.0,"method":"ping"}`) // not an integer literal
		if got := reply(t, s.atClient()); got.Error == nil || got.Error.Code != -32600 {
			t.Fatalf("id 1.0: %+v", got)
		}
		s.server(`{"jsonrpc":"2.0","id":1,"result":{"tools":[{"name":"secret"},{"name":"ok"}]}}`)
		if got := s.atClient(); strings.Contains(got, "secret") || !strings.Contains(got, `"ok"`) {
			t.Fatalf("client got %s", got)
		}
		// Control: once answered, the id may be used again.
		s.client(`{"jsonrpc":"2.0","id":1,"method":"ping"}`)
		if got := s.atServer(); !strings.Contains(got, "ping") {
			t.Fatalf("server got %s", got)
		}
	})

	t.Run("ids are exact: 2^53 and 2^53+1 differ", func(t *testing.T) {
		s := newRaw(t, Rules{Deny: []string{"secret"}})
		s.client(`{"jsonrpc":"2.0","id":9007199254740992,"method":"tools/list"}`)
		s.atServer()
		s.client(`{"jsonrpc":"2.0","id":9007199254740993,"method":"ping"}`)
		if got := s.atServer(); !strings.Contains(got, `"id":2`) {
			t.Fatalf("second id: server got %s", got)
		}
		s.client(`{"jsonrpc":"2.0","id":"9007199254740992","method":"ping"}`) // a string: another id
		s.atServer()
		s.server(`{"jsonrpc":"2.0","id":2,"result":{"tools":[{"name":"secret"}]}}`)
		if got := s.atClient(); got != `{"jsonrpc":"2.0","id":9007199254740993,"result":{"tools":[{"name":"secret"}]}}` {
			t.Fatalf("ping answer: %s", got)
		}
		s.server(`{"jsonrpc":"2.0","id":1,"result":{"tools":[{"name":"secret"},{"name":"ok"}]}}`)
		got := reply(t, s.atClient())
		if string(got.ID) != "9007199254740992" || strings.Contains(string(got.Result), "secret") {
			t.Fatalf("tools/list answer: %+v %s", got, got.Result)
		}
		s.server(`{"jsonrpc":"2.0","id":3,"result":{}}`)
		if got := reply(t, s.atClient()); string(got.ID) != `"9007199254740992"` {
			t.Fatalf("string id answer: %s", got.ID)
		}
	})

	t.Run("null and other ids are refused", func(t *testing.T) {
		s := newRaw(t, Rules{})
		for _, id := range []string{`null`, `{}`, `[1]`, `true`, `1.5`, `1e3`, `01`, `"` + strings.Repeat("x", 300) + `"`} {
			s.client(`{"jsonrpc":"2.0","id":` + id + `,"method":"tools/list"}`)
			got := reply(t, s.atClient())
			// 01 is not JSON at all: a parse error.
			if got.Error == nil || (got.Error.Code != -32600 && got.Error.Code != -32700) || string(got.ID) != "null" {
				t.Errorf("id %.20s: client got %+v", id, got)
			}
		}
		s.marker(t)
	})

	t.Run("a response with both result and error is an error", func(t *testing.T) {
		s := newRaw(t, Rules{Deny: []string{"secret"}})
		s.client(`{"jsonrpc":"2.0","id":"l","method":"tools/list"}`)
		s.atServer()
		s.server(`{"jsonrpc":"2.0","id":1,"result":{"tools":[{"name":"secret"}]},"error":{"code":-32001,"message":"boom"}}`)
		line := s.atClient()
		got := reply(t, line)
		if got.Error == nil || got.Error.Code != -32001 || got.Result != nil || strings.Contains(line, `"name":"secret"`) {
			t.Fatalf("client got %s", line)
		}
	})

	t.Run("a response for an id the relay did not issue is dropped", func(t *testing.T) {
		s := newRaw(t, Rules{})
		s.client(`{"jsonrpc":"2.0","id":"mine","method":"ping"}`)
		s.atServer()
		s.server(`{"jsonrpc":"2.0","id":"mine","result":{"forged":true}}`)
		s.server(`{"jsonrpc":"2.0","id":1,"result":{}}`)
		if got := s.atClient(); got != `{"jsonrpc":"2.0","id":"mine","result":{}}` {
			t.Fatalf("client got %s", got)
		}
	})
}

// TestRelayClientTooLong: a client message over the limit is answered
// under its id wherever the id is; one whose id cannot be read ends the
// session with an error saying so.
func TestRelayClientTooLong(t *testing.T) {
	big := strings.Repeat("x", 2<<20)
	s := newRaw(t, Rules{})
	for _, tc := range []struct{ line, id string }{
		{`{"jsonrpc":"2.0","method":"tools/call","params":{"name":"a","arguments":{"x":"` + big + `"}},"id":41}`, "41"},
		{`{"id":"s-1","jsonrpc":"2.0","method":"tools/call","params":{"x":"` + big + `"}}`, `"s-1"`},
		{`{"jsonrpc":"2.0","method":"tools/call","params":{"x":["` + big + `",{"id":5}]},"\u0069d":42}`, "42"},
	} {
		go io.WriteString(s.p.toRelay, tc.line+"\n")
		got := reply(t, s.atClient())
		if got.Error == nil || got.Error.Code != -32600 || string(got.ID) != tc.id || !strings.Contains(got.Error.Message, "over 1048576 bytes") {
			t.Errorf("client got %+v, want an error under id %s", got, tc.id)
		}
	}
	// A notification over the limit needs no answer.
	go io.WriteString(s.p.toRelay, `{"jsonrpc":"2.0","method":"notifications/x","params":{"x":"`+big+`"}}`+"\n")
	s.marker(t)
	var tooLarge int
	for _, r := range s.audit.records(t) {
		if r.Outcome == outcomeTooLarge && r.Method == "tools/call" {
			tooLarge++
		}
	}
	if tooLarge != 3 {
		t.Errorf("%d too_large records, want 3", tooLarge)
	}
	// Two ids: which one the client meant cannot be known.
	go io.WriteString(s.p.toRelay, `{"jsonrpc":"2.0","id":1,"method":"ping","params":{"x":"`+big+`"},"ID":2}`+"\n")
	// The relay stops reading the client and closes the server's input;
	// Serve would then end the server, whose output ends.
	if got := readWithin(t, s.toSrv, "server"); got != "" {
		t.Fatalf("server got %q", got)
	}
	s.p.fromSrv.Close()
	select {
	case err := <-s.errc:
		if !errors.Is(err, ErrSessionEnded) || !strings.Contains(err.Error(), "id could not be read") {
			t.Fatalf("relay: %v", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the relay did not end")
	}
}

func TestHeadScan(t *testing.T) {
	for _, tc := range []struct {
		in, id, method string
		ok             bool
	}{
		{`{"jsonrpc":"2.0","id":1,"method":"ping"}`, "1", "ping", true},
		{`{"method":"m","params":{"id":9,"method":"x"},"id":"a\"b"}`, `"a\"b"`, "m", true},
		{` { "id" : 7 , "method" : "m" } `, "7", "m", true},
		{`{"method":"n"}`, "", "n", true},
		{`{"id":1,"id":2,"method":"m"}`, "", "", false},
		{`{"id":1,"Id":2,"method":"m"}`, "", "", false},
		{`{"ID":0,"method":"m"}`, "", "", false},
		{`{"id":0,"Method":"m"}`, "", "", false},
		{`{"id":null,"method":"m"}`, "", "", false},
		{`{"id":{"a":1},"method":"m"}`, "", "", false},
		{`{"id":1.5,"method":"m"}`, "", "", false},
		{`{"id":1,"method":"m"`, "", "", false},
		{`[{"id":1,"method":"m"}]`, "", "", false},
		{`{"id":"` + strings.Repeat("y", 400) + `","method":"m"}`, "", "", false},
		{`{"ke` + strings.Repeat("y", 100) + `":1,"id":3,"method":"m"}`, "3", "m", true},
	} {
		var h headScan
		// Fed a byte at a time, as split as a reader can split it.
		for i := range len(tc.in) {
			h.feed([]byte{tc.in[i]})
		}
		id, method, ok := h.result()
		if ok != tc.ok || string(id) != tc.id || method != tc.method {
			t.Errorf("%.60s: %s %q %v, want %s %q %v", tc.in, id, method, ok, tc.id, tc.method, tc.ok)
		}
	}
}

// TestRelayPendingCap: past MaxPending, a request is refused at once with
// -32000 and never reaches the server; answered ones free their place.
func TestRelayPendingCap(t *testing.T) {
	s := newRawOpts(t, Options{MaxMessage: 1 << 20, MaxPending: 3})
	for i := 1; i <= 3; i++ {
		s.client(fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"ping"}`, i))
		s.atServer()
	}
	s.client(`{"jsonrpc":"2.0","id":4,"method":"tools/call","params":{"name":"x"}}`)
	if got := reply(t, s.atClient()); got.Error == nil || got.Error.Code != codeBusy || string(got.ID) != "4" {
		t.Fatalf("4th request: %+v", got)
	}
	s.server(`{"jsonrpc":"2.0","id":1,"result":{}}`)
	s.atClient()
	s.client(`{"jsonrpc":"2.0","id":5,"method":"ping"}`)
	if got := s.atServer(); !strings.Contains(got, "ping") {
		t.Fatalf("server got %s", got)
	}
	var refused []string
	for _, r := range s.audit.records(t) {
		if r.Outcome == outcomeRefused {
			refused = append(refused, r.Tool+":"+r.Rule)
		}
	}
	if fmt.Sprint(refused) != "[x:--max-pending 3]" {
		t.Errorf("audit refusals %v", refused)
	}
}

// TestRelayFloodPendingBounded: 100k requests the server never answers,
// and 32 calls with 10 MiB arguments under --audit-args, leave the relay's
// heap small. Control: with no cap, the same flood grows it.
func TestRelayFloodPendingBounded(t *testing.T) {
	if testing.Short() {
		t.Skip("a flood")
	}
	flood := func(t *testing.T, opts Options, n int, argSize int) uint64 {
		s := newRawOpts(t, opts)
		// The server reads and never answers.
		go io.Copy(io.Discard, s.p.toServer)
		// The client reads every refusal.
		answered := make(chan int, 1)
		go func() {
			br := bufio.NewReader(s.p.fromRelay)
			k := 0
			for {
				if _, err := br.ReadSlice('\n'); errors.Is(err, bufio.ErrBufferFull) {
					continue
				} else if err != nil {
					break
				}
				k++
			}
			answered <- k
		}()
		// The client's side allocates nothing per request, so the heap
		// measured is the relay's.
		head := []byte(`{"jsonrpc":"2.0","params":{"name":"t","arguments":{"a":"` + strings.Repeat("z", argSize) + `"}},"method":"tools/call","id":`)
		peak := heapPeak(t, func() {
			w := bufio.NewWriterSize(s.p.toRelay, 1<<16)
			var num []byte
			for i := range n {
				w.Write(head)
				num = strconv.AppendInt(num[:0], int64(i), 10)
				w.Write(num)
				w.WriteString("}\n")
			}
			w.Flush()
			s.p.toRelay.Close()
		})
		s.p.fromSrv.Close()
		select {
		case <-answered:
		case <-time.After(30 * time.Second):
			t.Fatal("the client side never ended")
		}
		return peak
	}
	capped := flood(t, Options{MaxMessage: 16 << 20, AuditArgs: true, Audit: io.Discard}, 100_000, 8)
	big := flood(t, Options{MaxMessage: 16 << 20, AuditArgs: true, Audit: io.Discard}, 32, 10<<20)
	t.Logf("heap peak: 100k pending %d MiB, 32 x 10 MiB arguments %d MiB", capped>>20, big>>20)
	if capped > 24<<20 || big > 48<<20 {
		t.Errorf("heap peaked at %d and %d MiB, want it flat", capped>>20, big>>20)
	}
	// Control: a pending cap as large as the flood holds every record.
	uncapped := flood(t, Options{MaxMessage: 16 << 20, AuditArgs: true, Audit: io.Discard, MaxPending: 200_000}, 100_000, 8)
	t.Logf("control, no effective cap: %d MiB", uncapped>>20)
	if uncapped < capped+8<<20 {
		t.Errorf("control: the uncapped flood peaked at %d MiB, capped %d: the measure does not see the records (untested)", uncapped>>20, capped>>20)
	}
}

// heapPeak runs f while sampling the heap in use, and returns the peak
// over the heap before.
func heapPeak(t *testing.T, f func()) uint64 {
	// HeapInuse counts garbage not yet collected, and on a loaded machine
	// (CI runs its lanes side by side) the collector falls behind: a low
	// GOGC keeps the peak near what the relay really holds. The control
	// (records held live) grows past the bounds whatever GOGC is.
	defer debug.SetGCPercent(debug.SetGCPercent(10))
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	base := ms.HeapInuse
	var peak atomic.Uint64
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		var ms runtime.MemStats
		for {
			runtime.ReadMemStats(&ms)
			if ms.HeapInuse > base && ms.HeapInuse-base > peak.Load() {
				peak.Store(ms.HeapInuse - base)
			}
			select {
			case <-stop:
				return
			case <-time.After(5 * time.Millisecond):
			}
		}
	}()
	f()
	close(stop)
	<-done
	return peak.Load()
}

// TestRelayServerEndlessLine: a server line that never ends ends the
// session as soon as it passes the limit.
func TestRelayServerEndlessLine(t *testing.T) {
	s := newRaw(t, Rules{})
	s.client(`{"jsonrpc":"2.0","id":1,"method":"ping"}`)
	s.atServer()
	stop := make(chan struct{})
	defer close(stop)
	go func() {
		chunk := []byte(`{"jsonrpc":"2.0","method":"x","params":"` + strings.Repeat("e", 64<<10))
		for {
			select {
			case <-stop:
				return
			default:
			}
			if _, err := s.p.fromSrv.Write(chunk); err != nil {
				return
			}
		}
	}()
	if got := reply(t, s.atClient()); got.Error == nil || !strings.Contains(got.Error.Message, "over 1048576 bytes") {
		t.Fatalf("pending call got %+v", got)
	}
	select {
	case err := <-s.errc:
		if !errors.Is(err, ErrSessionEnded) {
			t.Fatalf("relay: %v", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the relay kept reading the endless line")
	}
}

// TestRelayKinds: prompts and resources are filtered and refused like
// tools, allow-list mode closes the kinds it does not name, and
// completions and subscriptions follow their target's rules.
func TestRelayKinds(t *testing.T) {
	const (
		promptList   = `{"prompts":[{"name":"greet"},{"name":"secret_prompt"}]}`
		resourceList = `{"resources":[{"uri":"file:///pub/a"},{"uri":"file:///priv/key"}]}`
		templateList = `{"resourceTemplates":[{"uriTemplate":"file:///pub/{x}"},{"uriTemplate":"file:///priv/{x}"}]}`
	)
	for _, tc := range []struct {
		name    string
		rules   Rules
		visible []string // of greet, secret_prompt, file:///pub/a, file:///priv/key, the two templates
	}{
		{"no rules (control)", Rules{}, []string{"greet", "secret_prompt", "pub/a", "priv/key", "pub/{x}", "priv/{x}"}},
		{"deny", Rules{DenyPrompts: []string{"secret_*"}, DenyResources: []string{"file:///priv/*"}}, []string{"greet", "pub/a", "pub/{x}"}},
		{"allow", Rules{AllowPrompts: []string{"greet"}, AllowResources: []string{"file:///pub/*"}}, []string{"greet", "pub/a", "pub/{x}"}},
		{"allow-list mode closes the rest", Rules{Allow: []string{"*"}}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := newRaw(t, tc.rules)
			var shown []string
			for _, l := range []struct{ method, result string }{
				{"prompts/list", promptList}, {"resources/list", resourceList}, {"resources/templates/list", templateList},
			} {
				s.client(`{"jsonrpc":"2.0","id":"l","method":"` + l.method + `"}`)
				s.atServer()
				s.answer(l.result)
				got := s.atClient()
				for _, n := range []string{"greet", "secret_prompt", "pub/a", "priv/key", "pub/{x}", "priv/{x}"} {
					if strings.Contains(got, n+`"`) {
						shown = append(shown, n)
					}
				}
			}
			if fmt.Sprint(shown) != fmt.Sprint(tc.visible) {
				t.Errorf("lists show %v, want %v", shown, tc.visible)
			}
			// Each use reaches the server exactly when its target is visible.
			vis := map[string]bool{}
			for _, v := range tc.visible {
				vis[v] = true
			}
			for _, u := range []struct {
				line, target string
			}{
				{`{"jsonrpc":"2.0","id":"u","method":"prompts/get","params":{"name":"secret_prompt"}}`, "secret_prompt"},
				{`{"jsonrpc":"2.0","id":"u","method":"resources/read","params":{"uri":"file:///priv/key"}}`, "priv/key"},
				{`{"jsonrpc":"2.0","id":"u","method":"resources/subscribe","params":{"uri":"file:///priv/key"}}`, "priv/key"},
				{`{"jsonrpc":"2.0","id":"u","method":"completion/complete","params":{"ref":{"type":"ref/prompt","name":"secret_prompt"},"argument":{"name":"a","value":""}}}`, "secret_prompt"},
				{`{"jsonrpc":"2.0","id":"u","method":"completion/complete","params":{"ref":{"type":"ref/resource","uri":"file:///priv/key"},"argument":{"name":"a","value":""}}}`, "priv/key"},
				{`{"jsonrpc":"2.0","id":"u","method":"resources/read","params":{"uri":"file:///pub/a"}}`, "pub/a"},
			} {
				s.client(u.line)
				if vis[u.target] {
					if got := s.atServer(); !strings.Contains(got, u.target) {
						t.Errorf("%s: server got %s", u.line, got)
					}
					s.answer(`{}`)
					if got := reply(t, s.atClient()); got.Error != nil {
						t.Errorf("%s: %+v", u.line, got)
					}
					continue
				}
				if got := reply(t, s.atClient()); got.Error == nil || got.Error.Code != -32602 {
					t.Errorf("%s: client got %+v, want a refusal", u.line, got)
				}
			}
			// io.Pipe is synchronous: read what passes before writing more.
			s.server(`{"jsonrpc":"2.0","method":"notifications/resources/updated","params":{"uri":"file:///priv/key"}}`)
			if vis["priv/key"] {
				if got := s.atClient(); !strings.Contains(got, "priv/key") {
					t.Errorf("control: resources/updated: client got %s", got)
				}
			}
			s.server(`{"jsonrpc":"2.0","method":"notifications/message","params":{"data":"after"}}`)
			if got := s.atClient(); !strings.Contains(got, "after") {
				t.Errorf("resources/updated for a hidden resource reached the client: %s", got)
			}
		})
	}
}

// TestRelayServerRequests: sampling, elicitation and roots requests reach
// the client only when it declared the capability and no flag refuses
// them; the server gets an error otherwise; every one is audited.
func TestRelayServerRequests(t *testing.T) {
	const sampling = `{"jsonrpc":"2.0","id":"s1","method":"sampling/createMessage","params":{"messages":[],"maxTokens":1}}`
	const elicit = `{"jsonrpc":"2.0","id":"e1","method":"elicitation/create","params":{"message":"your password?","requestedSchema":{}}}`
	const roots = `{"jsonrpc":"2.0","id":"r1","method":"roots/list"}`
	for _, tc := range []struct {
		name, caps string
		deny       []string
		reach      map[string]bool
	}{
		{"no capability", `{}`, nil, map[string]bool{}},
		{"declared (control)", `{"sampling":{},"elicitation":{},"roots":{}}`, nil, map[string]bool{"s1": true, "e1": true, "r1": true}},
		{"declared but denied", `{"sampling":{},"elicitation":{},"roots":{}}`, []string{"sampling/createMessage", "elicitation/create"}, map[string]bool{"r1": true}},
		{"null is not declared", `{"sampling":null,"roots":{}}`, nil, map[string]bool{"r1": true}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := newRawOpts(t, Options{MaxMessage: 1 << 20, DenyServerRequests: tc.deny})
			s.client(`{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"capabilities":` + tc.caps + `}}`)
			s.atServer()
			s.server(`{"jsonrpc":"2.0","id":1,"result":{}}`)
			s.atClient()
			for _, l := range []string{sampling, elicit, roots} {
				s.server(l)
				var id struct{ ID string }
				json.Unmarshal([]byte(l), &id)
				if tc.reach[id.ID] {
					if got := s.atClient(); got != l {
						t.Errorf("client got %s, want %s", got, l)
					}
					s.client(`{"jsonrpc":"2.0","id":"` + id.ID + `","result":{}}`)
					if got := s.atServer(); !strings.Contains(got, `"result"`) {
						t.Errorf("server got %s, want the client's answer", got)
					}
					continue
				}
				got := reply(t, s.atServer())
				if got.Error == nil || got.Error.Code != -32601 || string(got.ID) != `"`+id.ID+`"` {
					t.Errorf("%s: server got %+v, want a refusal", id.ID, got)
				}
			}
			s.marker(t) // nothing refused reached the client either: the marker's answer comes next
			var recs []string
			for _, r := range s.audit.records(t) {
				if r.Event == "mcp_server_request" {
					recs = append(recs, r.Method+":"+r.Outcome)
				}
			}
			if len(recs) != 3 {
				t.Errorf("server request records %v, want 3", recs)
			}
		})
	}
}

// TestAuditCaps: argument values are kept only under --audit-args-max,
// and a line never passes --audit-line-max.
func TestAuditCaps(t *testing.T) {
	s := newRawOpts(t, Options{MaxMessage: 1 << 20, AuditArgs: true, AuditArgsMax: 64, AuditLineMax: 4096})
	for i, args := range []string{`{"a":1}`, `{"a":"` + strings.Repeat("b", 100) + `"}`, `{"a":1}`} {
		name := "t"
		if i == 2 {
			name = strings.Repeat("n", 2000) // a name longer than a line
		}
		s.client(fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":%q,"arguments":%s}}`, i, name, args))
		s.atServer()
		s.server(`{"jsonrpc":"2.0","id":` + fmt.Sprint(i+1) + `,"result":{}}`)
		s.atClient()
	}
	recs := s.audit.records(t)
	if string(recs[0].Args) != `{"a":1}` {
		t.Errorf("small args: %s", recs[0].Args)
	}
	if recs[1].Args != nil || !strings.Contains(recs[1].ArgsOmitted, "over 64 bytes") || *recs[1].ArgBytes != 108 {
		t.Errorf("large args: %+v", recs[1])
	}
	if len(recs[2].Tool) > 600 || !strings.Contains(recs[2].Tool, "(2000 bytes)") || string(recs[2].Args) != `{"a":1}` {
		t.Errorf("long name kept as %d bytes", len(recs[2].Tool))
	}
	s.audit.mu.Lock()
	for _, l := range strings.Split(s.audit.b.String(), "\n") {
		if len(l)+1 > 4096 {
			t.Errorf("audit line of %d bytes", len(l)+1)
		}
	}
	s.audit.mu.Unlock()
}

// TestAuditLineCap: a record that would pass --audit-line-max loses its
// argument values, not its line.
func TestAuditLineCap(t *testing.T) {
	s := newRawOpts(t, Options{MaxMessage: 1 << 20, AuditArgs: true, AuditArgsRaw: true, AuditArgsMax: 8000, AuditLineMax: 4096})
	s.client(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"t","arguments":{"a":"` + strings.Repeat("b", 5000) + `"}}}`)
	s.atServer()
	s.answer(`{}`)
	s.atClient()
	recs := s.audit.records(t)
	if len(recs) != 1 || recs[0].Args != nil || !strings.Contains(recs[0].ArgsOmitted, "over 4096 bytes") || recs[0].Tool != "t" {
		t.Fatalf("records %+v", recs)
	}
	// Control: under the line cap the values are kept.
	s.client(`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"t","arguments":{"a":"` + strings.Repeat("b", 3000) + `"}}}`)
	s.atServer()
	s.answer(`{}`)
	s.atClient()
	if recs := s.audit.records(t); len(recs) != 2 || len(recs[1].Args) < 3000 {
		t.Fatalf("control: records %+v", recs[1:])
	}
}

// TestRelayServerNotificationIDs: a subscription id in a server
// notification's _meta goes back to the client as the client's id; one
// naming no pending request is dropped; a response under a string id that
// reads like a relay id is dropped and the request stays pending.
func TestRelayServerNotificationIDs(t *testing.T) {
	s := newRaw(t, Rules{})
	s.client(`{"jsonrpc":"2.0","id":"listen-1","method":"subscriptions/listen","params":{}}`)
	s.atServer()
	s.server(`{"jsonrpc":"2.0","method":"notifications/tools/list_changed","params":{"_meta":{"io.modelcontextprotocol/subscriptionId":1}}}`)
	if got := s.atClient(); got != `{"jsonrpc":"2.0","method":"notifications/tools/list_changed","params":{"_meta":{"io.modelcontextprotocol/subscriptionId":"listen-1"}}}` {
		t.Fatalf("client got %s", got)
	}
	s.server(`{"jsonrpc":"2.0","method":"notifications/tools/list_changed","params":{"_meta":{"io.modelcontextprotocol/subscriptionId":99}}}`)
	s.server(`{"jsonrpc":"2.0","id":"1","result":{"forged":true}}`)
	s.server(`{"jsonrpc":"2.0","method":"notifications/message","params":{"data":"marker"}}`)
	if got := s.atClient(); !strings.Contains(got, "marker") {
		t.Fatalf("client got %s, want the marker", got)
	}
	s.answer(`{}`)
	if got := s.atClient(); got != `{"jsonrpc":"2.0","id":"listen-1","result":{}}` {
		t.Fatalf("the request was not left pending: %s", got)
	}
}
