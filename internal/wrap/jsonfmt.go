package wrap

import (
	"bytes"
	"encoding/json"
	"fmt"
	"path/filepath"
	"strings"
)

// scope is one object of servers in a JSON config.
type scope struct {
	path    []string // keys from the root to the object of servers
	project string
	label   string
}

// jsonScopes lists where format f keeps its servers.
func jsonScopes(f Format, root *node, path, home string) []scope {
	dir := filepath.Dir(path)
	// .vscode, .cursor and .gemini sit in the project; right in the home
	// directory they hold the user's own settings, which name no project.
	inProject := filepath.Dir(dir)
	if home != "" && filepath.Clean(inProject) == filepath.Clean(home) {
		inProject = ""
	}
	switch f {
	case ClaudeProject:
		return []scope{{path: []string{"mcpServers"}, project: dir}}
	case ClaudeDesktop:
		return []scope{{path: []string{"mcpServers"}}}
	case VSCode:
		return []scope{{path: []string{"servers"}, project: inProject}}
	case Cursor, Gemini:
		return []scope{{path: []string{"mcpServers"}, project: inProject}}
	}
	// ~/.claude.json: the user's servers, then each project's.
	sc := []scope{{path: []string{"mcpServers"}}}
	if projects := root.get("projects"); projects != nil && projects.kind == '{' {
		for _, m := range projects.members {
			sc = append(sc, scope{path: []string{"projects", m.key, "mcpServers"}, project: m.key, label: "project " + m.key})
		}
	}
	return sc
}

func lookup(root *node, path []string) *node {
	n := root
	for _, k := range path {
		n = n.get(k)
	}
	return n
}

func decodeJSONC(b []byte) (any, error) {
	n, err := parseJSONC(b)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrParse, err)
	}
	return n.plain(), nil
}

// jsonServers lists the servers of a JSON config with their edits.
func jsonServers(f Format, path string, content []byte, home string) ([]located, error) {
	root, err := parseJSONC(content)
	if err != nil {
		return nil, fmt.Errorf("%w: %s: %v", ErrParse, path, err)
	}
	if root.kind != '{' {
		return nil, fmt.Errorf("%w: %s: the top level is not an object", ErrParse, path)
	}
	var out []located
	for _, sc := range jsonScopes(f, root, path, home) {
		obj := lookup(root, sc.path)
		if obj == nil || obj.kind != '{' {
			continue
		}
		for _, m := range obj.members {
			s, err := jsonServer(m.key, m.val)
			s.Scope = sc.label
			l := located{Server: s, project: sc.project, path: append(append([]string(nil), sc.path...), m.key)}
			val := m.val
			l.editFn = func(o Outcome) ([]edit, error) {
				if err != nil {
					return nil, err
				}
				return jsonEdits(content, val, o)
			}
			out = append(out, l)
		}
	}
	return out, nil
}

// jsonServer reads one server object. An error means its fields are not
// what clients accept; the server is then left alone.
func jsonServer(name string, v *node) (Server, error) {
	s := Server{Name: name}
	if v.kind != '{' {
		return s, fmt.Errorf("server %q is not an object", name)
	}
	for _, k := range []string{"url", "httpUrl", "serverUrl"} {
		if v.get(k) != nil {
			s.Remote = "remote (" + k + ")"
		}
	}
	if t := v.get("type"); t != nil && t.kind == '"' && t.str != "stdio" {
		s.Remote = t.str
	}
	if c := v.get("command"); c != nil {
		if c.kind != '"' {
			return s, fmt.Errorf("server %q: command is not a string", name)
		}
		s.Command = c.str
	}
	if a := v.get("args"); a != nil {
		if a.kind != '[' {
			return s, fmt.Errorf("server %q: args is not a list", name)
		}
		for _, e := range a.elems {
			if e.kind != '"' {
				return s, fmt.Errorf("server %q: args holds a value that is not a string", name)
			}
			s.Args = append(s.Args, e.str)
		}
	}
	if e := v.get("env"); e != nil && e.kind == '{' {
		for _, m := range e.members {
			s.EnvNames = append(s.EnvNames, m.key)
		}
	}
	if c := v.get("cwd"); c != nil && c.kind == '"' {
		s.Cwd = c.str
	}
	return s, nil
}

// jsonEdits replaces the server's command and args values; a server with
// no args gets them on a line of their own after its command.
func jsonEdits(content []byte, v *node, o Outcome) ([]edit, error) {
	cmd := v.get("command")
	if cmd == nil {
		return nil, fmt.Errorf("no command")
	}
	edits := []edit{{cmd.start, cmd.end, jsonString(o.Command)}}
	if a := v.get("args"); a != nil {
		return append(edits, edit{a.start, a.end, jsonArray(o.Args)}), nil
	}
	keyStart := 0
	for _, m := range v.members {
		if m.val == cmd {
			keyStart = m.keyStart
		}
	}
	lineStart := bytes.LastIndexByte(content[:keyStart], '\n') + 1
	indent := content[lineStart:keyStart]
	sep := ",\n" + string(indent)
	if len(bytes.TrimLeft(indent, " \t")) > 0 {
		sep = ", " // the member shares its line with others
	}
	return append(edits, edit{cmd.end, cmd.end, sep + `"args": ` + jsonArray(o.Args)}), nil
}

func jsonString(s string) string {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(s) // a string always encodes
	return strings.TrimSuffix(b.String(), "\n")
}

func jsonArray(a []string) string {
	q := make([]string, len(a))
	for i, s := range a {
		q[i] = jsonString(s)
	}
	return "[" + strings.Join(q, ", ") + "]"
}
