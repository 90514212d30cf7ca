package mcp

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sort"
)

// PinVersion is the pin file format Pins.Marshal writes. ParsePins reads
// it and version 1 (tools only, each by a hash that leaves out _meta).
const PinVersion = 2

// The sections of a pin: what a client is shown of a server. The
// initialize section holds the members of the initialize result listed in
// initializeMembers; the others hold the entries of the list of that name,
// by name (prompts, tools), uriTemplate or uri.
const (
	SectionInitialize        = "initialize"
	SectionTools             = "tools"
	SectionPrompts           = "prompts"
	SectionResourceTemplates = "resourceTemplates"
	SectionResources         = "resources"
)

// Sections are the sections of a pin, in the order a diff lists them.
var sections = []string{SectionInitialize, SectionTools, SectionPrompts, SectionResourceTemplates, SectionResources}

// PinSections are the sections of a pin, in the order a pin file and a
// diff list them.
func PinSections() []string { return slices.Clone(sections) }

// initializeMembers are the members of an initialize result a pin holds:
// what a client shows or hands its model (protocolVersion and capabilities
// are negotiated per client and not pinned).
var initializeMembers = []string{"instructions", "serverInfo"}

// Pins are what a client trusts of a server (--pin FILE, --pin-from FILE):
// for each section, each entry's definition in canonical JSON (see
// Canonical), every member included: name, title, description, schemas,
// annotations, icons, _meta and any member a later protocol adds.
type Pins struct {
	// Version is the format the pins were read from (1 or 2); Marshal
	// always writes PinVersion.
	Version int
	// Sections maps a section to its entries. A section that is absent is
	// not pinned (see Options.PinStrict); an empty one pins that there is
	// nothing.
	Sections map[string]map[string]json.RawMessage
	// legacy holds a version 1 file's tool hashes (see DefinitionHash);
	// Sections has no tools then.
	legacy map[string]string
}

// maxPinnedTools bounds each section of a pin file and what a session
// remembers of the definitions it saw: a server listing more is not
// tracked past it.
const maxPinnedTools = 10000

// pinFile is the version 2 file: its members in this order, each section
// a map written with sorted keys.
type pinFile struct {
	Version           int                         `json:"version"`
	Initialize        *map[string]json.RawMessage `json:"initialize,omitempty"`
	Tools             *map[string]json.RawMessage `json:"tools,omitempty"`
	Prompts           *map[string]json.RawMessage `json:"prompts,omitempty"`
	ResourceTemplates *map[string]json.RawMessage `json:"resourceTemplates,omitempty"`
	Resources         *map[string]json.RawMessage `json:"resources,omitempty"`
}

func (f *pinFile) fields() map[string]**map[string]json.RawMessage {
	return map[string]**map[string]json.RawMessage{SectionInitialize: &f.Initialize, SectionTools: &f.Tools,
		SectionPrompts: &f.Prompts, SectionResourceTemplates: &f.ResourceTemplates, SectionResources: &f.Resources}
}

// ParsePins reads a pin file. Version 2: one JSON object with "version": 2
// and any of the sections, each an object of definitions; no other member.
// Version 1 (no "version"): {"tools": {NAME: HASH}}, every hash 64
// lower-case hex digits.
func ParsePins(b []byte) (*Pins, error) {
	var probe struct {
		Version *int `json:"version"`
	}
	if err := json.Unmarshal(b, &probe); err != nil {
		return nil, fmt.Errorf("not a pin file: %w", err)
	}
	switch {
	case probe.Version == nil:
		return parsePinsV1(b)
	case *probe.Version != PinVersion:
		return nil, fmt.Errorf("pin file version %d: this sandbox-run reads versions 1 and %d", *probe.Version, PinVersion)
	}
	var f pinFile
	if err := strictDecode(b, &f); err != nil {
		return nil, err
	}
	p := &Pins{Version: PinVersion, Sections: map[string]map[string]json.RawMessage{}}
	for sec, field := range f.fields() {
		if *field == nil {
			continue
		}
		if len(**field) > maxPinnedTools {
			return nil, fmt.Errorf("%s: more than %d entries", sec, maxPinnedTools)
		}
		m := make(map[string]json.RawMessage, len(**field))
		for name, def := range **field {
			c, err := Canonical(def)
			if err != nil {
				return nil, fmt.Errorf("%s %q: %w", sec, capString(name), err)
			}
			m[name] = c
		}
		p.Sections[sec] = m
	}
	return p, nil
}

// strictDecode decodes one JSON object into v, refusing unknown members
// and trailing data.
func strictDecode(b []byte, v any) error {
	d := json.NewDecoder(bytes.NewReader(b))
	d.DisallowUnknownFields()
	if err := d.Decode(v); err != nil {
		return fmt.Errorf("not a pin file: %w", err)
	}
	if d.More() {
		return errors.New("not a pin file: data after the object")
	}
	return nil
}

// parsePinsV1 reads a version 1 file.
func parsePinsV1(b []byte) (*Pins, error) {
	var v1 struct {
		Tools map[string]string `json:"tools"`
	}
	if err := strictDecode(b, &v1); err != nil {
		return nil, err
	}
	if v1.Tools == nil {
		return nil, errors.New("not a pin file: no \"version\" and no \"tools\" member")
	}
	if len(v1.Tools) > maxPinnedTools {
		return nil, fmt.Errorf("more than %d tools", maxPinnedTools)
	}
	for name, h := range v1.Tools {
		if b, err := hex.DecodeString(h); err != nil || len(b) != sha256.Size || hex.EncodeToString(b) != h {
			return nil, fmt.Errorf("tool %q: %q is not a SHA-256 in hex", capString(name), capString(h))
		}
	}
	return &Pins{Version: 1, Sections: map[string]map[string]json.RawMessage{}, legacy: v1.Tools}, nil
}

// Legacy says whether the pins were read from a version 1 file: tools
// only, each by DefinitionHash, so a change of _meta or of anything but
// the tools goes unseen.
func (p *Pins) Legacy() bool { return p.legacy != nil }

// Marshal renders the pins as a version 2 pin file: sections in a fixed
// order, entries sorted, two-space indents, no HTML escaping. A version 1
// pin's tools cannot be written as definitions and are left out.
func (p *Pins) Marshal() []byte {
	f := pinFile{Version: PinVersion}
	fields := f.fields()
	for _, sec := range sections {
		if m, ok := p.Sections[sec]; ok {
			m := m
			*fields[sec] = &m
		}
	}
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	if err := enc.Encode(f); err != nil {
		// Every entry is canonical JSON: Encode cannot fail on it.
		panic("BUG(sandbox-run): mcp: a pin that does not encode: " + err.Error())
	}
	return b.Bytes()
}

// Count is how many entries the pins hold, in all sections.
func (p *Pins) Count() int {
	n := len(p.legacy)
	for _, m := range p.Sections {
		n += len(m)
	}
	return n
}

// Canonical re-encodes one JSON value with object keys sorted, numbers as
// written, no insignificant whitespace and no HTML escaping: two
// definitions are the same to a pin when their canonical forms are equal
// byte for byte, whatever their member order and spacing.
func Canonical(raw []byte) (json.RawMessage, error) {
	d := json.NewDecoder(bytes.NewReader(raw))
	d.UseNumber()
	var v any
	if err := d.Decode(&v); err != nil {
		return nil, err
	}
	if d.More() {
		return nil, errors.New("data after the value")
	}
	return canonicalValue(v)
}

func canonicalValue(v any) (json.RawMessage, error) {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(b.Bytes(), []byte("\n")), nil
}

// DefinitionHash is a version 1 pin's hash of a tools/list entry: the
// SHA-256, in hex, of every member but _meta, re-encoded with sorted keys
// and numbers as written. Version 2 pins hold the definitions themselves,
// _meta included.
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

// sortedKeys returns m's keys, sorted.
func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
