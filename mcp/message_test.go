package mcp

import (
	"bytes"
	"encoding/json"
	"errors"
	"strings"
	"testing"
)

func TestParseObject(t *testing.T) {
	for _, tc := range []struct {
		in    string
		want  map[string]string // nil: an error
		ambig bool
	}{
		{`{}`, map[string]string{}, false},
		{` { "a" : 1 , "b":[1,{"c":"}"}], "d":"x\"y" } `, map[string]string{"a": `1`, "b": `[1,{"c":"}"}]`, "d": `"x\"y"`}, false},
		{`{"a\u0062":true}`, map[string]string{"ab": `true`}, false},
		{`{"a":1,"a":2}`, nil, true},
		{`{"id":1,"ID":2}`, nil, true},
		{`{"name":1,"nam\u0065":2}`, nil, true},
		{`{"k":1,"\u212a":2}`, nil, true}, // Kelvin sign folds to k
		{`[1]`, nil, false},
		{`"s"`, nil, false},
		{`{"a":1}x`, nil, false},
		{`{"a":1`, nil, false},
		{``, nil, false},
	} {
		obj, err := parseObject([]byte(tc.in))
		if tc.want == nil {
			if err == nil {
				t.Errorf("%s: no error", tc.in)
			} else if errors.Is(err, errAmbiguous) != tc.ambig {
				t.Errorf("%s: %v, ambiguous want %v", tc.in, err, tc.ambig)
			}
			continue
		}
		if err != nil {
			t.Errorf("%s: %v", tc.in, err)
			continue
		}
		if len(obj) != len(tc.want) {
			t.Errorf("%s: %d members, want %d", tc.in, len(obj), len(tc.want))
		}
		for k, v := range tc.want {
			if string(obj[k]) != v {
				t.Errorf("%s: %s = %s, want %s", tc.in, k, obj[k], v)
			}
		}
	}
}

// FuzzParseObject: whatever parseObject accepts, encoding/json reads the
// same way, and no two of its keys fold together.
func FuzzParseObject(f *testing.F) {
	for _, s := range []string{`{}`, `{"a":1,"b":"c"}`, `{"a":{"b":[1,2,{"c":"]"}]}}`, `{"a\u0041":null}`,
		`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"x"}}`, `{"a":1,"A":2}`, `[{}]`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		obj, err := parseObject(b)
		var ref map[string]json.RawMessage
		refErr := json.Unmarshal(b, &ref)
		if err != nil {
			if refErr == nil && !errors.Is(err, errAmbiguous) && ref != nil {
				t.Fatalf("refused %q that encoding/json reads as an object: %v", b, err)
			}
			return
		}
		if refErr != nil || ref == nil {
			t.Fatalf("accepted %q that encoding/json refuses: %v", b, refErr)
		}
		if len(obj) != len(ref) {
			t.Fatalf("%q: %d members, encoding/json %d", b, len(obj), len(ref))
		}
		var keys []string
		for k, v := range obj {
			if !bytes.Equal(bytes.TrimSpace(v), bytes.TrimSpace(ref[k])) {
				t.Fatalf("%q: %s = %s, encoding/json %s", b, k, v, ref[k])
			}
			for _, o := range keys {
				if strings.EqualFold(o, k) {
					t.Fatalf("%q: keys %q and %q fold together", b, o, k)
				}
			}
			keys = append(keys, k)
		}
	})
}

// FuzzHeadScan: whatever headScan reads from an object parseObject
// accepts is that object's own top-level id and method, and it never
// panics on anything.
func FuzzHeadScan(f *testing.F) {
	for _, s := range []string{`{"jsonrpc":"2.0","id":1,"method":"ping"}`, `{"method":"m","params":{"id":2},"id":"x"}`,
		`{"id":1,"ID":2}`, `{"id":[1],"method":"m"}`, `{"\u0069d":3,"method":"m"}`, `[{"id":1}]`, `{"id":"a\"}"}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		var h headScan
		h.feed(b)
		id, method, ok := h.result()
		if !ok {
			return
		}
		obj, err := parseObject(b)
		if err != nil {
			return // not one object two parsers agree on: nothing to compare
		}
		if method != obj.str("method") {
			t.Fatalf("%q: method %q, the object's %q", b, method, obj.str("method"))
		}
		if id == nil {
			if obj.has("id") {
				t.Fatalf("%q: no id read, the object has %s", b, obj["id"])
			}
			return
		}
		k1, _ := idKey(id)
		k2, err := idKey(obj["id"])
		if err != nil || k1 != k2 {
			t.Fatalf("%q: id %s, the object's %s (%v)", b, id, obj["id"], err)
		}
	})
}
