package mcp

import (
	"bytes"
	"encoding/json"
	"fmt"
	"reflect"
	"strings"
	"testing"
)

func TestNearMiss(t *testing.T) {
	for _, tc := range []struct {
		key, want string // want "": not a near miss
	}{
		{"id", ""}, {"ID", "id"}, {"Id", "id"}, {"id\x00", "id"}, {"\x00id", "id"}, {"i\x00d", "id"},
		{"id\x00\x00", "id"}, {"id\x00evil", "id"}, {"id ", "id"}, {"id\u200b", "id"}, {"id\u0085", "id"},
		{"METHOD", "method"}, {"jsonrpc\t", "jsonrpc"}, {"Params", "params"}, {"RESULT", "result"},
		{"idx", ""}, {"ids", ""}, {"method2", ""}, {"x\x00", ""}, {"\x00", ""}, {"", ""},
	} {
		want, ok := envelopeMembers.nearMiss(tc.key)
		if want != tc.want || ok != (tc.want != "") {
			t.Errorf("envelope %q: near miss of %q (%v), want %q", tc.key, want, ok, tc.want)
		}
	}
	for _, tc := range []struct {
		s         memberSet
		key, want string
	}{
		{paramsMembers, "Name", "name"}, {paramsMembers, "name\x00", "name"}, {paramsMembers, "URI", "uri"},
		{paramsMembers, "Cursor", "cursor"}, {paramsMembers, "_META", "_meta"}, {paramsMembers, "Arguments", "arguments"},
		{paramsMembers, "\u017fame", ""}, // the long s folds to s, not n
		{paramsMembers, "argument", ""}, {paramsMembers, "url", ""}, {paramsMembers, "messages", ""},
		{listMembers, "Tools", "tools"}, {listMembers, "tools\x00", "tools"}, {listMembers, "nextcursor", "nextCursor"},
		{listMembers, "resourcetemplates", "resourceTemplates"}, {entryMembers, "uritemplate", "uriTemplate"},
		{metaMembers, "io.modelcontextprotocol/clientcapabilities", metaClientCapabilities},
		{refMembers, "Type", "type"}, {refMembers, "\u212ayte", ""},
	} {
		want, ok := tc.s.nearMiss(tc.key)
		if want != tc.want || ok != (tc.want != "") {
			t.Errorf("%v %q: near miss of %q (%v), want %q", tc.s.names, tc.key, want, ok, tc.want)
		}
	}
}

// TestParseEnvelopeStrict: the messages a lenient parser reads otherwise
// are refused, with a reason; the exact ones pass. Control: encoding/json,
// as mcp-go and the Go SDK before v1.3.1 use it, reads each case variant
// as the request the relay would refuse by its rules.
func TestParseEnvelopeStrict(t *testing.T) {
	for _, tc := range []struct {
		in, err string // err "": accepted
		lenient bool   // encoding/json reads a tools/call of write_file with id 1
	}{
		{`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"write_file"}}`, "", true},
		{`{"jsonrpc":"2.0","ID":1,"method":"tools/call","params":{"name":"write_file"}}`, `member "ID" differs from "id"`, true},
		{`{"jsonrpc":"2.0","id":1,"Method":"tools/call","params":{"name":"write_file"}}`, `member "Method" differs from "method"`, true},
		{`{"jsonrpc":"2.0","id":1,"method":"tools/call","Params":{"name":"write_file"}}`, `member "Params" differs from "params"`, true},
		{`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"Name":"write_file"}}`, `params: member "Name" differs from "name"`, true},
		{`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name\u0000":"write_file"}}`, `params: member "name\x00" differs`, false},
		{`{"jsonrpc":"2.0","id\u0000":1,"method":"tools/call","params":{"name":"write_file"}}`, `member "id\x00" differs`, false},
		{`{"jsonrpc":"2.0","method":"tools/call","params":{"name":"write_file"}}`, "has no id", false},
		{`{"jsonrpc":"2.0","method":"ping"}`, "has no id", false},
		{`{"jsonrpc":"2.0","method":"x/unknown"}`, "has no id", false},
		{`{"jsonrpc":"2.0","method":"notifications/initialized"}`, "", false},
		{`{"jsonrpc":"2.0","id":1,"method":"ping","params":{"_meta":{"ProgressToken":1}}}`, `params._meta: member "ProgressToken"`, false},
		{`{"jsonrpc":"1.0","id":1,"method":"ping"}`, `jsonrpc is not "2.0"`, false},
		{`{"id":1,"method":"ping"}`, `jsonrpc is not "2.0"`, false},
		{`{"jsonrpc":"2.0","id":1,"method":"ping","params":[1]}`, "params: not a JSON object", false},
		{`{"jsonrpc":"2.0","id":1,"result":{},"params":{}}`, "a response with params", false},
		{`{"jsonrpc":"2.0","id":1,"result":{},"extra":{"ID":2}}`, "", false}, // unknown members: dropped
	} {
		_, err := parseEnvelope([]byte(tc.in))
		switch {
		case tc.err == "" && err != nil:
			t.Errorf("%s: %v", tc.in, err)
		case tc.err != "" && (err == nil || !strings.Contains(fmt.Sprintf("%q", err.Error()), strings.Trim(fmt.Sprintf("%q", tc.err), `"`))):
			t.Errorf("%s: %v, want %q", tc.in, err, tc.err)
		}
		var naive struct {
			ID     any
			Method string
			Params struct{ Name string }
		}
		json.Unmarshal([]byte(tc.in), &naive)
		if got := naive.ID != nil && naive.Method == "tools/call" && naive.Params.Name == "write_file"; got != tc.lenient {
			t.Errorf("control: encoding/json reads %s as a call of write_file: %v, want %v", tc.in, got, tc.lenient)
		}
	}
}

func TestCanon(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{` { "a" : [ 1 , 2.50 , -0 , 1e3 ] , "b" : true , "c" : null } `, `{"a":[1,2.50,-0,1e3],"b":true,"c":null}`},
		{`"plain ascii"`, `"plain ascii"`},
		{`"é ✓"`, `"é ✓"`},
		{`"\u0061\/\"\\\n\t\u0001\u00e9"`, `"a/\"\\\n\t\u0001é"`},
		{`"\ud800x"`, "\"\uFFFDx\""},
		{"\"a\xffb\"", "\"a\uFFFDb\""},
		{`{"k\u0000":"v\u001f"}`, `{"k\u0000":"v\u001f"}`},
		{`"<&>\u2028"`, "\"<&>\u2028\""},
	} {
		if got := string(appendCanon(nil, []byte(tc.in))); got != tc.want {
			t.Errorf("%s: %s, want %s", tc.in, got, tc.want)
		}
	}
}

// TestEmitterChunks: a message written through a writer comes out whole,
// in pieces of bounded size but for long plain strings.
func TestEmitterChunks(t *testing.T) {
	big := strings.Repeat("x", 3*emitChunk)
	esc := strings.Repeat(`\u0041`, emitChunk)
	raw := []byte(`{"a":"` + big + `","b":[` + strings.Repeat(`1, `, emitChunk) + `1],"c":"` + esc + `"}`)
	var w bytes.Buffer
	em := emitter{w: &w}
	em.canon(raw)
	em.flush()
	if want := appendCanon(nil, raw); !bytes.Equal(w.Bytes(), want) || em.err != nil {
		t.Fatalf("through a writer: %d bytes (%v), collected: %d", w.Len(), em.err, len(want))
	}
	if cap(em.buf) > 2*emitChunk+len(esc) {
		t.Errorf("the buffer grew to %d bytes", cap(em.buf))
	}
}

// FuzzCanon: whatever parseEnvelope accepts, the relay's encoding of it
// parses again to the same message (kind, method, id, and every member's
// value as encoding/json reads it), and encoding that gives the same bytes.
func FuzzCanon(f *testing.F) {
	for _, s := range []string{`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"x","arguments":{"a":[1,"\u00e9"]}}}`,
		`{"jsonrpc":"2.0","method":"notifications/x","params":{"k\u0000":"\ud800"}}`, `{"jsonrpc":"2.0","id":"a","result":{"tools":[]},"x":1}`,
		`{"jsonrpc":"2.0","id":2,"error":{"code":-1,"message":"m"}}`, "{\"jsonrpc\":\"2.0\",\"id\":3,\"result\":\"\xff\"}"} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		e, err := parseEnvelope(b)
		if err != nil {
			return
		}
		out := e.out().appendTo(nil)
		e2, err := parseEnvelope(bytes.TrimSuffix(out, []byte("\n")))
		if err != nil {
			t.Fatalf("%q: its encoding %q is refused: %v", b, out, err)
		}
		if e2.kind != e.kind || e2.method != e.method || e2.idKey != e.idKey {
			t.Fatalf("%q: encoded as %q, read as another message", b, out)
		}
		for _, k := range []string{"params", "result", "error"} {
			if !sameJSON(e.obj[k], e2.obj[k]) {
				t.Fatalf("%q: %s %s encoded as %s", b, k, e.obj[k], e2.obj[k])
			}
		}
		if again := e2.out().appendTo(nil); !bytes.Equal(again, out) {
			t.Fatalf("%q: encoded %q, then %q", b, out, again)
		}
	})
}

// sameJSON says a and b are one value to encoding/json (numbers by their
// digits), or both absent.
func sameJSON(a, b json.RawMessage) bool {
	if (a == nil) != (b == nil) {
		return false
	}
	if a == nil {
		return true
	}
	read := func(r json.RawMessage) any {
		d := json.NewDecoder(bytes.NewReader(r))
		d.UseNumber()
		var v any
		if err := d.Decode(&v); err != nil {
			return err.Error()
		}
		return v
	}
	return reflect.DeepEqual(read(a), read(b))
}

// TestRelayNearMissClient: a client message whose id, method or name is
// spelt so that a lenient parser reads a call of the denied tool, or that
// calls it without an id, never reaches the server: the client gets
// -32600 with the reason, the audit a refusal naming it. Control: the
// marker after them is the next thing the server reads, and the exact
// spelling of an allowed call passes (TestRelayMalformedNames).
func TestRelayNearMissClient(t *testing.T) {
	s := newRaw(t, Rules{Deny: []string{"write_file"}})
	lines := []struct{ line, reason string }{
		{`{"jsonrpc":"2.0","ID":1,"method":"tools/call","params":{"name":"write_file"}}`, `member "ID" differs from "id"`},
		{`{"jsonrpc":"2.0","id":2,"Method":"tools/call","params":{"name":"write_file"}}`, `member "Method" differs from "method"`},
		{`{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"echo","Name":"write_file"}}`, "ambiguous"},
		{`{"jsonrpc":"2.0","id":4,"method":"tools/call","params":{"Name":"write_file"}}`, `member "Name" differs from "name"`},
		{`{"jsonrpc":"2.0","id":5,"method":"tools/call","params":{"name":"echo","name\u0000":"write_file"}}`, `member "name\x00" differs from "name"`},
		{`{"jsonrpc":"2.0","id\u0000":6,"method":"tools/call","params":{"name":"write_file"}}`, `member "id\x00" differs from "id"`},
		{`{"jsonrpc":"2.0","method":"tools/call","params":{"name":"write_file"}}`, "has no id"},
		{`{"jsonrpc":"2.0","method":"resources/read","params":{"uri":"file:///x"}}`, "has no id"},
		{`{"jsonrpc":"2.0","id":7,"method":"tools/list","params":{"Cursor":"page2"}}`, `member "Cursor" differs from "cursor"`},
		{`{"jsonrpc":"2.0","id":8,"method":"completion/complete","params":{"ref":{"Type":"ref/prompt","name":"p"}}}`, `member "Type" differs from "type"`},
	}
	for _, l := range lines {
		s.client(l.line)
		got := reply(t, s.atClient())
		if got.Error == nil || got.Error.Code != -32600 || !strings.Contains(fmt.Sprintf("%q", got.Error.Message), strings.Trim(fmt.Sprintf("%q", l.reason), `"`)) {
			t.Errorf("%s: client got %+v, want -32600 saying %s", l.line, got, l.reason)
		}
	}
	s.marker(t)
	recs := s.audit.records(t)
	if len(recs) < len(lines) {
		t.Fatalf("%d records for %d refusals", len(recs), len(lines))
	}
	for i, rec := range recs[:len(lines)] {
		if rec.Outcome != outcomeRefused || !strings.HasPrefix(rec.Rule, "malformed:") {
			t.Errorf("record %d: %+v, want a refusal", i, rec)
		}
	}
	if r := recs[6]; r.Method != "tools/call" || r.Tool != "write_file" || r.Event != "mcp_call" {
		t.Errorf("the call without an id is recorded as %+v", r)
	}
}

// TestRelayNearMissServer: server requests and list results spelt so that
// a lenient client reads them otherwise never reach the client: a request
// with a readable id gets -32600, one without is dropped, a list result is
// withheld, and each is audited. Control: the exact spellings pass.
func TestRelayNearMissServer(t *testing.T) {
	s := newRaw(t, Rules{Deny: []string{"write_file"}})
	s.client(`{"jsonrpc":"2.0","id":"i","method":"initialize","params":{"capabilities":{"sampling":{},"roots":{},"elicitation":{}}}}`)
	s.atServer()
	s.answer(`{}`)
	s.atClient()
	// Control: the exact request reaches the client.
	s.server(`{"jsonrpc":"2.0","id":"ok","method":"roots/list"}`)
	if got := s.atClient(); !strings.Contains(got, `"roots/list"`) {
		t.Fatalf("control: client got %s", got)
	}
	for _, l := range []struct{ line, toServer string }{
		{`{"jsonrpc":"2.0","id":"s1","method":"sampling/createMessage","Params":{}}`, `"s1"`},
		{`{"jsonrpc":"2.0","id":"s2","method":"elicitation/create","params":{"_Meta":{}}}`, `"s2"`},
		{`{"jsonrpc":"2.0","ID":"s3","method":"sampling/createMessage","params":{}}`, ""},
		{`{"jsonrpc":"2.0","id\u0000":"s4","method":"roots/list"}`, ""},
		{`{"jsonrpc":"2.0","method":"sampling/createMessage","params":{"messages":[]}}`, ""},
		{`{"jsonrpc":"2.0","method":"elicitation/create","params":{}}`, ""},
	} {
		s.server(l.line)
		if l.toServer != "" {
			if got := s.atServer(); !strings.Contains(got, `"id":`+l.toServer) || !strings.Contains(got, "-32600") {
				t.Errorf("%s: server got %s", l.line, got)
			}
		}
	}
	// A list result under a member spelt otherwise is withheld.
	for i, res := range []string{`{"Tools":[{"name":"write_file"}]}`, `{"tools":[],"tools\u0000":[{"name":"write_file"}]}`} {
		s.client(fmt.Sprintf(`{"jsonrpc":"2.0","id":"l%d","method":"tools/list"}`, i))
		s.atServer()
		s.answer(res)
		if got := reply(t, s.atClient()); got.Error == nil || strings.Contains(string(got.Result), "write_file") {
			t.Errorf("list result %s: client got %+v", res, got)
		}
	}
	s.server(`{"jsonrpc":"2.0","method":"notifications/message","params":{"data":"marker"}}`)
	if got := s.atClient(); !strings.Contains(got, "marker") {
		t.Fatalf("a refused server message reached the client: %s", got)
	}
	var got []string
	for _, r := range s.audit.records(t) {
		if r.Outcome != outcomeOK {
			got = append(got, r.Event+" "+r.Method+" "+r.Outcome)
		}
	}
	want := []string{"mcp_server_request sampling/createMessage refused", "mcp_server_request elicitation/create refused",
		"mcp_dropped sampling/createMessage refused", "mcp_dropped roots/list refused", "mcp_dropped sampling/createMessage refused",
		"mcp_dropped elicitation/create refused", "mcp_request tools/list withheld", "mcp_request tools/list withheld"}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("audit\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}
