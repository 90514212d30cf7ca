package audit

import (
	"bytes"
	"encoding/json"
	"testing"
)

func TestEvent(t *testing.T) {
	var b bytes.Buffer
	Event(&b, "r1", "run_start", map[string]any{"tier": 1, "event": "spoofed"})
	Event(nil, "r1", "ignored", nil)
	var m map[string]any
	if err := json.Unmarshal(b.Bytes(), &m); err != nil {
		t.Fatalf("not one JSON line: %q: %v", b.String(), err)
	}
	if m["event"] != "run_start" || m["run_id"] != "r1" || m["tier"] != float64(1) || m["time"] == nil {
		t.Fatalf("event = %v", m)
	}
	if n := bytes.Count(b.Bytes(), []byte("\n")); n != 1 {
		t.Fatalf("%d lines, want 1", n)
	}
}
