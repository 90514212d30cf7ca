package mcp

import (
	"bytes"
	"encoding/json"
	"fmt"
)

// listing says which member of a list result holds the entries, which
// member of an entry names it, and the kind the rules judge it as.
type listing struct {
	member, field, kind string
}

var listings = map[string]listing{
	methodToolsList:              {"tools", "name", KindTool},
	methodPromptsList:            {"prompts", "name", KindPrompt},
	methodResourcesList:          {"resources", "uri", KindResource},
	methodResourcesTemplatesList: {"resourceTemplates", "uriTemplate", KindResource},
}

// filterResult drops hidden entries from a list result. It returns the
// result to deliver, or nil when nothing changed; every other member stays
// as the server sent it. An entry that is not an object with a non-empty
// string name is dropped too, and so is one with a member that is a near
// miss of its name (see memberSet); a result with a near miss of the
// list's members is an error (the client could read hidden entries
// there).
func (r *relay) filterResult(c *call, e envelope) (json.RawMessage, error) {
	l, ok := listings[c.method]
	raw, isResult := e.obj["result"]
	if c.method == methodInitialize && isResult {
		return nil, r.pinInitialize(raw)
	}
	if !ok || !isResult {
		return nil, nil
	}
	res, err := parseObject(raw)
	if err == nil {
		err = listMembers.check(res)
	}
	if err != nil {
		return nil, err
	}
	var entries []json.RawMessage
	if t, ok := res[l.member]; ok && string(t) != "null" {
		if err := json.Unmarshal(t, &entries); err != nil {
			return nil, fmt.Errorf("%s is not a list: %w", l.member, err)
		}
	}
	r.mu.Lock()
	r.pinListed(c.method)
	r.mu.Unlock()
	kept := make([][]byte, 0, len(entries))
	for _, t := range entries {
		obj, err := parseObject(t)
		if err == nil {
			err = entryMembers.check(obj)
		}
		if err != nil {
			r.log.Warn(c.method+" entry dropped", "error", err.Error())
			continue
		}
		name := obj.str(l.field)
		if ok := r.listedVisible(l, name); ok && name != "" && r.definitionVisible(c.method, name, t) {
			kept = append(kept, t)
		}
	}
	if len(kept) == len(entries) {
		return nil, nil
	}
	list := append(append([]byte{'['}, bytes.Join(kept, []byte{','})...), ']')
	return splice(raw, res[l.member], list), nil
}

// definitionVisible notes a listed entry's definition (see
// noteDefinition) and says whether the pin shows it.
func (r *relay) definitionVisible(method, name string, entry json.RawMessage) bool {
	section := listSections[method]
	def, err := Canonical(entry)
	if err != nil {
		return false
	}
	r.mu.Lock()
	changed, hiddenWhy := r.noteDefinition(section, name, def)
	r.mu.Unlock()
	if changed != "" {
		r.flagDefinition(section, name, changed, hiddenWhy != "")
	}
	if hiddenWhy != "" {
		r.flagDefinition(section, name, hiddenWhy, true)
		return false
	}
	return true
}
