package wrap

import (
	"fmt"
	"sort"
	"strconv"
	"strings"

	"github.com/BurntSushi/toml"
)

// Codex's config.toml is edited as text: only the values of command and
// args in a [mcp_servers.NAME] table are replaced, so that comments,
// order and spacing elsewhere stay as the user wrote them (a TOML
// encoder would rewrite the whole file).

func decodeTOML(b []byte) (any, error) {
	var v map[string]any
	if _, err := toml.Decode(string(b), &v); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrParse, err)
	}
	return v, nil
}

// tomlKV is one key = value line of a table, with the value's bytes.
type tomlKV struct {
	key        []string
	valueStart int
	valueEnd   int
}

// tomlTable is a [header] table: its key path and its key/value pairs.
type tomlTable struct {
	key []string
	kvs []tomlKV
}

// codexServers lists the [mcp_servers.NAME] servers of a Codex config.
func codexServers(content []byte) ([]located, error) {
	v, err := decodeTOML(content)
	if err != nil {
		return nil, err
	}
	tables, err := scanTOML(content)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrParse, err)
	}
	doc, _ := v.(map[string]any)
	servers, _ := doc["mcp_servers"].(map[string]any)
	names := make([]string, 0, len(servers))
	for n := range servers {
		names = append(names, n)
	}
	sort.Strings(names)
	var out []located
	for _, name := range names {
		m, _ := servers[name].(map[string]any)
		s := codexServer(name, m)
		var table *tomlTable
		for i := range tables {
			if len(tables[i].key) == 2 && tables[i].key[0] == "mcp_servers" && tables[i].key[1] == name {
				table = &tables[i]
			}
		}
		out = append(out, located{Server: s, path: []string{"mcp_servers", name}, editFn: func(o Outcome) ([]edit, error) {
			if table == nil {
				return nil, fmt.Errorf("server %q is not written as a [mcp_servers.%s] table; write it as one to wrap it", name, name)
			}
			return codexEdits(content, table, o)
		}})
	}
	return out, nil
}

func codexServer(name string, m map[string]any) Server {
	s := Server{Name: name}
	s.Command, _ = m["command"].(string)
	if u, ok := m["url"].(string); ok && u != "" {
		s.Remote = "streamable HTTP (url)"
	}
	args, _ := m["args"].([]any)
	for _, a := range args {
		if str, ok := a.(string); ok {
			s.Args = append(s.Args, str)
		}
	}
	env, _ := m["env"].(map[string]any)
	for k := range env {
		s.EnvNames = append(s.EnvNames, k)
	}
	// env_vars: names Codex copies from its own environment.
	vars, _ := m["env_vars"].([]any)
	for _, a := range vars {
		if str, ok := a.(string); ok {
			s.EnvNames = append(s.EnvNames, str)
		}
	}
	s.Cwd, _ = m["cwd"].(string)
	return s
}

func codexEdits(content []byte, t *tomlTable, o Outcome) ([]edit, error) {
	var cmd, args *tomlKV
	for i := range t.kvs {
		switch kv := &t.kvs[i]; {
		case len(kv.key) == 1 && kv.key[0] == "command":
			cmd = kv
		case len(kv.key) == 1 && kv.key[0] == "args":
			args = kv
		}
	}
	if cmd == nil {
		return nil, fmt.Errorf("no command = line in [mcp_servers.%s]", o.Server.Name)
	}
	edits := []edit{{cmd.valueStart, cmd.valueEnd, tomlString(o.Command)}}
	if args != nil {
		return append(edits, edit{args.valueStart, args.valueEnd, tomlArray(o.Args)}), nil
	}
	return append(edits, edit{cmd.valueEnd, cmd.valueEnd, "\nargs = " + tomlArray(o.Args)}), nil
}

// tomlString is s as a TOML basic string.
func tomlString(s string) string {
	var b strings.Builder
	b.WriteByte('"')
	for _, r := range s {
		switch {
		case r == '"' || r == '\\':
			b.WriteByte('\\')
			b.WriteRune(r)
		case r < 0x20 || r == 0x7f:
			fmt.Fprintf(&b, `\u%04X`, r)
		default:
			b.WriteRune(r)
		}
	}
	b.WriteByte('"')
	return b.String()
}

func tomlArray(a []string) string {
	q := make([]string, len(a))
	for i, s := range a {
		q[i] = tomlString(s)
	}
	return "[" + strings.Join(q, ", ") + "]"
}

// tomlScanner walks a TOML text far enough to find tables, keys and the
// extent of every value. Values are not decoded here: toml.Decode has
// already accepted the file, and the scanner only needs their ends.
type tomlScanner struct {
	b []byte
	i int
}

func scanTOML(b []byte) ([]tomlTable, error) {
	s := &tomlScanner{b: b}
	tables := []tomlTable{{}}
	for {
		s.skip(" \t\r\n")
		if s.i >= len(b) {
			return tables, nil
		}
		switch b[s.i] {
		case '#':
			s.toEOL()
		case '[':
			key, err := s.header()
			if err != nil {
				return nil, err
			}
			tables = append(tables, tomlTable{key: key})
		default:
			kv, err := s.keyValue()
			if err != nil {
				return nil, err
			}
			t := &tables[len(tables)-1]
			t.kvs = append(t.kvs, kv)
		}
	}
}

func (s *tomlScanner) skip(set string) {
	for s.i < len(s.b) && strings.IndexByte(set, s.b[s.i]) >= 0 {
		s.i++
	}
}

func (s *tomlScanner) toEOL() {
	for s.i < len(s.b) && s.b[s.i] != '\n' {
		s.i++
	}
}

func (s *tomlScanner) header() ([]string, error) {
	s.i++
	array := s.i < len(s.b) && s.b[s.i] == '['
	if array {
		s.i++
	}
	key, err := s.key()
	if err != nil {
		return nil, err
	}
	s.skip(" \t")
	if s.i >= len(s.b) || s.b[s.i] != ']' {
		return nil, fmt.Errorf("offset %d: expected ]", s.i)
	}
	s.i++
	if array {
		s.i++
		// An array of tables: its own kind, never a server table.
		key = append([]string{"[["}, key...)
	}
	return key, nil
}

// key reads a dotted key.
func (s *tomlScanner) key() ([]string, error) {
	var parts []string
	for {
		s.skip(" \t")
		if s.i >= len(s.b) {
			return nil, fmt.Errorf("offset %d: expected a key", s.i)
		}
		var part string
		switch c := s.b[s.i]; c {
		case '"', '\'':
			end := s.stringEnd()
			if end < 0 {
				return nil, fmt.Errorf("offset %d: unterminated key", s.i)
			}
			raw := string(s.b[s.i:end])
			part = raw[1 : len(raw)-1]
			if c == '"' {
				u, err := strconv.Unquote(raw)
				if err != nil {
					return nil, fmt.Errorf("offset %d: key %s: %v", s.i, raw, err)
				}
				part = u
			}
			s.i = end
		default:
			start := s.i
			for s.i < len(s.b) && isBareKey(s.b[s.i]) {
				s.i++
			}
			if s.i == start {
				return nil, fmt.Errorf("offset %d: expected a key", s.i)
			}
			part = string(s.b[start:s.i])
		}
		parts = append(parts, part)
		s.skip(" \t")
		if s.i >= len(s.b) || s.b[s.i] != '.' {
			return parts, nil
		}
		s.i++
	}
}

func isBareKey(c byte) bool {
	return c == '_' || c == '-' || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9')
}

func (s *tomlScanner) keyValue() (tomlKV, error) {
	key, err := s.key()
	if err != nil {
		return tomlKV{}, err
	}
	s.skip(" \t")
	if s.i >= len(s.b) || s.b[s.i] != '=' {
		return tomlKV{}, fmt.Errorf("offset %d: expected = after %s", s.i, strings.Join(key, "."))
	}
	s.i++
	s.skip(" \t")
	kv := tomlKV{key: key, valueStart: s.i}
	if err := s.value(0); err != nil {
		return tomlKV{}, err
	}
	kv.valueEnd = s.i
	return kv, nil
}

// stringEnd is the offset just past the string that starts at s.i (basic,
// literal, or either multi-line form), -1 if it does not end.
func (s *tomlScanner) stringEnd() int {
	q := s.b[s.i]
	if s.i+2 < len(s.b) && s.b[s.i+1] == q && s.b[s.i+2] == q {
		delim := string([]byte{q, q, q})
		for j := s.i + 3; j+3 <= len(s.b); j++ {
			if q == '"' && s.b[j] == '\\' {
				j++
				continue
			}
			if string(s.b[j:j+3]) == delim {
				// Up to two more quotes belong to the content.
				end := j + 3
				for k := 0; k < 2 && end < len(s.b) && s.b[end] == q; k++ {
					end++
				}
				return end
			}
		}
		return -1
	}
	for j := s.i + 1; j < len(s.b) && s.b[j] != '\n'; j++ {
		switch {
		case q == '"' && s.b[j] == '\\':
			j++
		case s.b[j] == q:
			return j + 1
		}
	}
	return -1
}

// value moves s.i past the value that starts there.
func (s *tomlScanner) value(depth int) error {
	if depth > maxDepth {
		return fmt.Errorf("offset %d: nested deeper than %d", s.i, maxDepth)
	}
	if s.i >= len(s.b) {
		return fmt.Errorf("offset %d: expected a value", s.i)
	}
	switch c := s.b[s.i]; c {
	case '"', '\'':
		end := s.stringEnd()
		if end < 0 {
			return fmt.Errorf("offset %d: unterminated string", s.i)
		}
		s.i = end
		return nil
	case '[', '{':
		return s.container(c, depth)
	}
	// A number, boolean or date: up to a comment, a separator or the line's end.
	start := s.i
	for s.i < len(s.b) && strings.IndexByte("#,]}\r\n", s.b[s.i]) < 0 {
		s.i++
	}
	for s.i > start && (s.b[s.i-1] == ' ' || s.b[s.i-1] == '\t') {
		s.i--
	}
	return nil
}

func (s *tomlScanner) container(open byte, depth int) error {
	close := byte(']')
	if open == '{' {
		close = '}'
	}
	s.i++
	for {
		s.skip(" \t\r\n,")
		if s.i >= len(s.b) {
			return fmt.Errorf("offset %d: unterminated %c", s.i, open)
		}
		switch c := s.b[s.i]; {
		case c == close:
			s.i++
			return nil
		case c == '#':
			s.toEOL()
		case open == '{':
			if _, err := s.keyValue(); err != nil {
				return err
			}
		default:
			if err := s.value(depth + 1); err != nil {
				return err
			}
		}
	}
}
