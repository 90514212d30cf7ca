package mcp

import (
	"bytes"
	"encoding/json"
	"strconv"
	"strings"
	"unicode"
)

// Kinds of PinChange.
const (
	ChangeAdded   = "added"   // advertised now, not in the pin
	ChangeRemoved = "removed" // in the pin, not advertised now
	ChangeChanged = "changed" // in both, with another definition
)

// PinChange is one difference between a pin and what a server advertises.
type PinChange struct {
	Section string // SectionTools, ...
	Name    string // the entry's name, uriTemplate or uri; the member of the initialize result
	Kind    string // ChangeAdded, ChangeRemoved or ChangeChanged
	// Fields are, for a change, the paths of the members that differ
	// (description, inputSchema.properties.key, _meta.ui.resourceUri),
	// each marked "(added)" or "(removed)" when only one side has it; at
	// most maxFieldPaths of them, then "...". Empty when the pin cannot
	// say (a version 1 pin holds a hash).
	Fields []string
}

// String is the change as one line: "changed tools/echo: description".
// Names and paths that are not plain printable text are quoted, so that
// a server's name cannot write control sequences to a terminal.
func (c PinChange) String() string {
	s := c.Kind + " " + c.Section + "/" + printable(c.Name)
	if len(c.Fields) == 0 {
		return s
	}
	f := make([]string, len(c.Fields))
	for i, p := range c.Fields {
		f[i] = printable(p)
	}
	return s + ": " + strings.Join(f, ", ")
}

// printable is s, or s quoted when it holds anything but printable
// characters and no quote.
func printable(s string) string {
	for _, r := range s {
		if !unicode.IsPrint(r) || r == '"' {
			return strconv.Quote(s)
		}
	}
	return s
}

// DiffPins lists what differs between pinned and now, section by section
// (in the order of the pin file), names sorted. A section now lacks is
// not compared (it was not listed); a section pinned lacks counts as
// empty. A version 1 pin's tools are compared by hash.
func DiffPins(pinned, now *Pins) []PinChange {
	var out []PinChange
	for _, sec := range sections {
		cur, listed := now.Sections[sec]
		if !listed {
			continue
		}
		if sec == SectionTools && pinned.legacy != nil {
			out = append(out, diffLegacy(pinned.legacy, cur)...)
			continue
		}
		out = append(out, diffSection(sec, pinned.Sections[sec], cur)...)
	}
	return out
}

// diffSection compares one section's entries.
func diffSection(sec string, old, cur map[string]json.RawMessage) []PinChange {
	var out []PinChange
	for _, name := range sortedKeys(old) {
		c, ok := cur[name]
		switch {
		case !ok:
			out = append(out, PinChange{Section: sec, Name: name, Kind: ChangeRemoved})
		case !bytes.Equal(old[name], c):
			out = append(out, PinChange{Section: sec, Name: name, Kind: ChangeChanged, Fields: fieldDiff(old[name], c)})
		}
	}
	for _, name := range sortedKeys(cur) {
		if _, ok := old[name]; !ok {
			out = append(out, PinChange{Section: sec, Name: name, Kind: ChangeAdded})
		}
	}
	return out
}

// diffLegacy compares tools with a version 1 pin's hashes.
func diffLegacy(old map[string]string, cur map[string]json.RawMessage) []PinChange {
	var out []PinChange
	for _, name := range sortedKeys(old) {
		c, ok := cur[name]
		if !ok {
			out = append(out, PinChange{Section: SectionTools, Name: name, Kind: ChangeRemoved})
		} else if h, _ := DefinitionHash(c); h != old[name] {
			out = append(out, PinChange{Section: SectionTools, Name: name, Kind: ChangeChanged})
		}
	}
	for _, name := range sortedKeys(cur) {
		if _, ok := old[name]; !ok {
			out = append(out, PinChange{Section: SectionTools, Name: name, Kind: ChangeAdded})
		}
	}
	return out
}

// maxFieldPaths bounds the paths a change names.
const maxFieldPaths = 20

// fieldDiff names the members in which two canonical JSON values differ:
// objects are compared member by member, down to the values that differ
// (a list is one value); a path is dotted. Two values that are not both
// objects give no path.
func fieldDiff(a, b json.RawMessage) []string {
	var va, vb any
	if unmarshalNumber(a, &va) != nil || unmarshalNumber(b, &vb) != nil {
		return nil
	}
	var out []string
	walkDiff("", va, vb, &out)
	if len(out) > maxFieldPaths {
		out = append(out[:maxFieldPaths], "...")
	}
	return out
}

func unmarshalNumber(raw []byte, v *any) error {
	d := json.NewDecoder(bytes.NewReader(raw))
	d.UseNumber()
	return d.Decode(v)
}

func walkDiff(path string, a, b any, out *[]string) {
	if len(*out) > maxFieldPaths {
		return
	}
	oa, aObj := a.(map[string]any)
	ob, bObj := b.(map[string]any)
	if !aObj || !bObj {
		ca, _ := canonicalValue(a)
		cb, _ := canonicalValue(b)
		if !bytes.Equal(ca, cb) && path != "" {
			// A value that is not an object (instructions) needs no path.
			*out = append(*out, path)
		}
		return
	}
	for _, k := range sortedKeys(oa) {
		if vb, ok := ob[k]; ok {
			walkDiff(join(path, k), oa[k], vb, out)
		} else {
			*out = append(*out, join(path, k)+" (removed)")
		}
	}
	for _, k := range sortedKeys(ob) {
		if _, ok := oa[k]; !ok {
			*out = append(*out, join(path, k)+" (added)")
		}
	}
}

func join(path, k string) string {
	if path == "" {
		return k
	}
	return path + "." + k
}
