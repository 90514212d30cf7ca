// Package audit writes a run's events as JSON lines: one object per event,
// with its time, the run's id and the event's name beside its fields.
//
// A write that fails is dropped: the audit never ends or slows a run. It
// does not sync, rotate or lock the writer; several writers of one file
// share it through one io.Writer that serialises its writes (an *os.File
// opened with O_APPEND does, for lines under PIPE_BUF).
package audit

import (
	"encoding/json"
	"io"
	"time"
)

// Event appends one event to w as a JSON line: time (RFC 3339, UTC),
// run_id, event, and fields, which must not use those three names. A nil w
// writes nothing.
func Event(w io.Writer, runID, event string, fields map[string]any) {
	if w == nil {
		return
	}
	m := make(map[string]any, len(fields)+3)
	for k, v := range fields {
		m[k] = v
	}
	m["time"] = time.Now().UTC().Format(time.RFC3339Nano)
	m["run_id"] = runID
	m["event"] = event
	b, err := json.Marshal(m)
	if err != nil {
		return
	}
	w.Write(append(b, '\n'))
}
