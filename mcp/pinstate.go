package mcp

import (
	"bytes"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"strings"
)

// pinState is what a relay keeps about the definitions it relays.
type pinState struct {
	pins   *Pins // nil: no pin
	record bool  // take every definition seen as the new pin
	strict bool  // a section the pins lack hides all of its entries
	// seen is the hash of each definition first seen this session, by
	// section and name.
	seen map[string]map[string][sha256.Size]byte
	// took is what this session records: every section in record mode,
	// else the sections the pins lack (not strict), and a version 1
	// pin's tools that matched (to write them as version 2).
	took      map[string]map[string]json.RawMessage
	tookBytes int
	hidden    map[string]map[string]string // section -> name -> why the pin hides it
	warned    map[string]bool
}

// maxRecordedBytes bounds the definitions one session records.
const maxRecordedBytes = 64 << 20

// Reasons a definition is flagged, as the audit records them.
const (
	pinChanged    = "definition changed within the session"
	pinDiffers    = "definition differs from the pin file"
	pinNotPinned  = "not in the pin file"
	pinTooMany    = "more entries than the relay tracks"
	eventToolDefn = "mcp_tool_changed"
	eventDefn     = "mcp_definition_changed"
)

// pinNoSection is why a strict pin hides every entry of a section it
// lacks.
func pinNoSection(section string) string { return "the pin file pins no " + section }

// listSections maps a list method to the section of its entries.
var listSections = map[string]string{
	methodToolsList:              SectionTools,
	methodPromptsList:            SectionPrompts,
	methodResourcesTemplatesList: SectionResourceTemplates,
	methodResourcesList:          SectionResources,
}

// kindSections maps what a request names to the section its definition
// is listed in.
var kindSections = map[string]string{KindTool: SectionTools, KindPrompt: SectionPrompts, KindResource: SectionResources}

func (ps *pinState) init() {
	if ps.seen == nil {
		ps.seen = map[string]map[string][sha256.Size]byte{}
		ps.took = map[string]map[string]json.RawMessage{}
		ps.hidden = map[string]map[string]string{}
		ps.warned = map[string]bool{}
	}
}

// take records def as the session's definition of name, the first one
// seen winning; listing (name "") only marks the section as listed.
func (ps *pinState) take(section, name string, def json.RawMessage) {
	m := ps.took[section]
	if m == nil {
		m = map[string]json.RawMessage{}
		ps.took[section] = m
	}
	if _, ok := m[name]; ok || name == "" || len(m) >= maxPinnedTools || ps.tookBytes+len(def) > maxRecordedBytes {
		return
	}
	m[name] = def
	ps.tookBytes += len(def)
}

// recording says whether this session records section rather than
// judging it.
func (ps *pinState) recording(section string) bool {
	if ps.record {
		return true
	}
	if section == SectionTools && ps.pins.legacy != nil {
		return false
	}
	_, pinned := ps.pins.Sections[section]
	return !pinned && !ps.strict
}

// pinListed notes that the client was sent a list result of method, so
// that a recording session pins even an empty list. Call with r.mu held.
func (r *relay) pinListed(method string) {
	ps := &r.pin
	sec, ok := listSections[method]
	if !ok || ps.pins == nil {
		return
	}
	ps.init()
	if ps.recording(sec) {
		ps.take(sec, "", nil)
	}
}

// noteDefinition records the canonical definition def of a listed entry
// and says whether the pin lets the client see it: changed is set when
// the definition is not the one first seen this session (or the relay
// tracks no more entries), hiddenWhy when the pin hides the entry. Call
// with r.mu held.
func (r *relay) noteDefinition(section, name string, def json.RawMessage) (changed, hiddenWhy string) {
	ps := &r.pin
	ps.init()
	seen := ps.seen[section]
	if seen == nil {
		seen = map[string][sha256.Size]byte{}
		ps.seen[section] = seen
	}
	sum := sha256.Sum256(def)
	if first, ok := seen[name]; ok && first != sum {
		changed = pinChanged
		seen[name] = sum
	} else if !ok && len(seen) < maxPinnedTools {
		seen[name] = sum
	} else if !ok {
		changed = pinTooMany
	}
	if ps.pins == nil {
		return changed, ""
	}
	why := ps.judge(section, name, def)
	if ps.hidden[section] == nil {
		ps.hidden[section] = map[string]string{}
	}
	if why == "" {
		delete(ps.hidden[section], name)
	} else {
		ps.hidden[section][name] = why
	}
	return changed, why
}

// judge says why the pins hide def, or "" (and records it when the
// session records its section).
func (ps *pinState) judge(section, name string, def json.RawMessage) string {
	if ps.recording(section) {
		ps.take(section, name, def)
		return ""
	}
	if section == SectionTools && ps.pins.legacy != nil {
		h, err := DefinitionHash(def)
		switch l, ok := ps.pins.legacy[name]; {
		case !ok:
			return pinNotPinned
		case err != nil || l != h:
			return pinDiffers
		}
		ps.take(section, name, def)
		return ""
	}
	entries, ok := ps.pins.Sections[section]
	if !ok {
		return pinNoSection(section)
	}
	pinned, ok := entries[name]
	switch {
	case !ok:
		return pinNotPinned
	case !bytes.Equal(pinned, def):
		return pinDiffers + " (" + strings.Join(fieldDiff(pinned, def), ", ") + ")"
	}
	return ""
}

// pinRefusal says why the pin refuses a request naming name, of kind
// (KindTool, KindPrompt, KindResource), or "". A tool or prompt the pin
// does not name is refused; a resource only when its listed entry was
// hidden, since a server reads URIs it never lists (templates): the
// resource rules judge those. Call with r.mu held.
func (r *relay) pinRefusal(kind, name string) string {
	ps := &r.pin
	section, ok := kindSections[kind]
	if ps.pins == nil || ps.record || !ok {
		return ""
	}
	if why := ps.hidden[section][name]; why != "" {
		return why
	}
	switch {
	case kind == KindResource, ps.recording(section):
		return ""
	case section == SectionTools && ps.pins.legacy != nil:
		if _, ok := ps.pins.legacy[name]; !ok {
			return pinNotPinned
		}
		return ""
	}
	entries, ok := ps.pins.Sections[section]
	if !ok {
		return pinNoSection(section)
	}
	if _, ok := entries[name]; !ok {
		return pinNotPinned
	}
	return ""
}

// pinInitialize judges an initialize result by the pin: its members in
// initializeMembers must be those pinned, as pinned. On a mismatch it
// warns, audits what changed, and returns an error for the client in
// place of the result; a recording session takes them instead.
func (r *relay) pinInitialize(result json.RawMessage) error {
	if r.pin.pins == nil {
		return nil
	}
	res, err := parseObject(result)
	if err != nil {
		return fmt.Errorf("--pin: the initialize result is not an object: %w", err)
	}
	cur := map[string]json.RawMessage{}
	for _, m := range initializeMembers {
		if v, ok := res[m]; ok {
			if cur[m], err = Canonical(v); err != nil {
				return fmt.Errorf("--pin: initialize result member %s: %w", m, err)
			}
		}
	}
	r.mu.Lock()
	ps := &r.pin
	ps.init()
	var why string
	if ps.recording(SectionInitialize) {
		ps.take(SectionInitialize, "", nil)
		for m, v := range cur {
			ps.take(SectionInitialize, m, v)
		}
	} else if pinned, ok := ps.pins.Sections[SectionInitialize]; !ok {
		why = pinNoSection(SectionInitialize)
	} else {
		var parts []string
		for _, c := range diffSection(SectionInitialize, pinned, cur) {
			parts = append(parts, c.String())
		}
		if len(parts) > 0 {
			why = "the initialize result differs from the pin file: " + strings.Join(parts, "; ")
		}
	}
	r.mu.Unlock()
	if why == "" {
		return nil
	}
	r.flagDefinition(SectionInitialize, "", why, true)
	return fmt.Errorf("--pin: %s; refused; fix: review it with sandbox-run pin diff, then pin it again", why)
}

// recorded returns what the session recorded to be saved, or nil when
// there is nothing new: every section in record mode; else the sections
// the pins lacked, added to them, and a version 1 pin rewritten as
// version 2 once every tool it names was listed and matched. A strict
// pin is never rewritten.
func (r *relay) recorded() *Pins {
	r.mu.Lock()
	defer r.mu.Unlock()
	ps := &r.pin
	if ps.pins == nil || ps.strict || len(ps.took) == 0 {
		return nil
	}
	out := &Pins{Version: PinVersion, Sections: map[string]map[string]json.RawMessage{}}
	if !ps.record {
		for sec, m := range ps.pins.Sections {
			out.Sections[sec] = m
		}
	}
	fresh := false
	for sec, m := range ps.took {
		if sec == SectionTools && !ps.record && ps.pins.legacy != nil {
			if len(m) != len(ps.pins.legacy) {
				continue
			}
		}
		out.Sections[sec] = m
		fresh = true
	}
	if !fresh && !ps.record {
		return nil
	}
	if ps.pins.legacy != nil && !ps.record && out.Sections[SectionTools] == nil {
		// The version 1 tools could not be taken: keep the file as it is.
		return nil
	}
	return out
}

// flagDefinition warns on the relay's log and audits a flagged
// definition, once per entry and reason.
func (r *relay) flagDefinition(section, name, why string, hidden bool) {
	r.mu.Lock()
	r.pin.init()
	key := section + "\x00" + name + "\x00" + why
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
	if section == SectionInitialize {
		outcome = outcomeRefused
	}
	r.log.Warn(strings.TrimSuffix(section, "s")+" definition "+outcome, "name", capString(name), "reason", why)
	if r.audit == nil {
		return
	}
	rec := Record{Time: r.audit.now().UTC(), Event: eventDefn, Outcome: outcome, Reason: why}
	switch section {
	case SectionTools:
		rec.Event, rec.Tool = eventToolDefn, capString(name)
	case SectionPrompts:
		rec.Prompt = capString(name)
	case SectionInitialize:
		rec.Method = methodInitialize
	default:
		rec.URI = capString(name)
	}
	if rec.Method == "" {
		for m, s := range listSections {
			if s == section {
				rec.Method = m
			}
		}
	}
	r.audit.write(rec)
}
