package mcp

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
)

// Pins are the tool definitions a client trusts (--pin FILE): each tool's
// name and the SHA-256 of its definition (see DefinitionHash).
type Pins struct {
	Tools map[string]string `json:"tools"`
}

// maxPinnedTools bounds a pin file and what a session remembers of the
// definitions it saw: a server listing more is not tracked past it.
const maxPinnedTools = 10000

// ParsePins reads a pin file: one JSON object {"tools": {NAME: HASH}}, no
// other member, every hash 64 lower-case hex digits.
func ParsePins(b []byte) (*Pins, error) {
	d := json.NewDecoder(bytes.NewReader(b))
	d.DisallowUnknownFields()
	var p Pins
	if err := d.Decode(&p); err != nil {
		return nil, fmt.Errorf("not a pin file: %w", err)
	}
	if d.More() {
		return nil, errors.New("not a pin file: data after the object")
	}
	if p.Tools == nil {
		return nil, errors.New("not a pin file: no \"tools\" member")
	}
	if len(p.Tools) > maxPinnedTools {
		return nil, fmt.Errorf("more than %d tools", maxPinnedTools)
	}
	for name, h := range p.Tools {
		if b, err := hex.DecodeString(h); err != nil || len(b) != sha256.Size || hex.EncodeToString(b) != h {
			return nil, fmt.Errorf("tool %q: %q is not a SHA-256 in hex", capString(name), capString(h))
		}
	}
	return &p, nil
}

// Marshal renders the pins as a pin file, names sorted.
func (p *Pins) Marshal() []byte {
	names := make([]string, 0, len(p.Tools))
	for n := range p.Tools {
		names = append(names, n)
	}
	sort.Strings(names)
	var b bytes.Buffer
	b.WriteString("{\"tools\": {")
	for i, n := range names {
		if i > 0 {
			b.WriteString(",")
		}
		k, _ := json.Marshal(n)
		fmt.Fprintf(&b, "\n  %s: %q", k, p.Tools[n])
	}
	b.WriteString("\n}}\n")
	return b.Bytes()
}

// DefinitionHash is the SHA-256, in hex, of a tools/list entry as the
// client sees it: every member but _meta (name, title, description,
// inputSchema, outputSchema, annotations, ...), re-encoded with sorted keys
// and numbers as written, so that whitespace and member order do not
// count and every word a model reads does.
func DefinitionHash(tool json.RawMessage) (string, error) {
	d := json.NewDecoder(bytes.NewReader(tool))
	d.UseNumber()
	var v map[string]any
	if err := d.Decode(&v); err != nil {
		return "", err
	}
	delete(v, "_meta")
	b, err := json.Marshal(v)
	if err != nil {
		return "", err
	}
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:]), nil
}

// pinState is what a relay keeps about tool definitions.
type pinState struct {
	pins   *Pins             // nil: no pin file
	record bool              // take every definition seen as the new pin
	seen   map[string]string // name -> hash first seen this session
	hidden map[string]string // name -> why the pin hides it
	warned map[string]bool
}

// Reasons a definition is flagged, as the audit records them.
const (
	pinChanged    = "definition changed within the session"
	pinDiffers    = "definition differs from the pin file"
	pinNotPinned  = "not in the pin file"
	pinTooMany    = "more tools than the relay tracks"
	eventToolDefn = "mcp_tool_changed"
)

// noteDefinition records the definition of a listed tool and says whether
// the pin lets the client see it: changed is set when the definition is not
// the one first seen this session (or the relay tracks no more tools),
// hiddenWhy when the pin hides the tool. Call with r.mu held.
func (r *relay) noteDefinition(name, hash string) (changed, hiddenWhy string) {
	ps := &r.pin
	if ps.seen == nil {
		ps.seen, ps.hidden, ps.warned = map[string]string{}, map[string]string{}, map[string]bool{}
	}
	if first, ok := ps.seen[name]; ok && first != hash {
		changed = pinChanged
		ps.seen[name] = hash
	} else if !ok && len(ps.seen) < maxPinnedTools {
		ps.seen[name] = hash
	} else if !ok {
		changed = pinTooMany
	}
	if ps.pins == nil || ps.record {
		return changed, ""
	}
	switch pinned, ok := ps.pins.Tools[name]; {
	case !ok:
		ps.hidden[name] = pinNotPinned
	case pinned != hash:
		ps.hidden[name] = pinDiffers
	default:
		delete(ps.hidden, name)
	}
	return changed, ps.hidden[name]
}

// pinRefusal says why the pin refuses a call to name, or "". Call with
// r.mu held.
func (r *relay) pinRefusal(name string) string {
	ps := &r.pin
	if ps.pins == nil || ps.record {
		return ""
	}
	if why := ps.hidden[name]; why != "" {
		return why
	}
	if _, ok := ps.pins.Tools[name]; !ok {
		return pinNotPinned
	}
	return ""
}

// recorded returns the definitions seen, as pins (for --pin-update and a
// first session).
func (r *relay) recorded() *Pins {
	r.mu.Lock()
	defer r.mu.Unlock()
	p := &Pins{Tools: map[string]string{}}
	for n, h := range r.pin.seen {
		p.Tools[n] = h
	}
	return p
}

// flagDefinition warns on the relay's log and audits a flagged
// definition, once per tool and reason.
func (r *relay) flagDefinition(name, why string, hidden bool) {
	r.mu.Lock()
	if r.pin.warned == nil {
		r.pin.warned = map[string]bool{}
	}
	key := name + "\x00" + why
	done := r.pin.warned[key]
	r.pin.warned[key] = true
	r.mu.Unlock()
	if done {
		return
	}
	outcome := "flagged"
	if hidden {
		outcome = "hidden"
	}
	r.log.Warn("tool definition "+outcome, "tool", capString(name), "reason", why)
	if r.audit != nil {
		r.audit.write(Record{Time: r.audit.now().UTC(), Event: eventToolDefn, Tool: capString(name), Outcome: outcome, Reason: why})
	}
}
