package devenv

import (
	"strings"
)

// Identity is the part of a git config the sandbox carries. Empty fields
// were not set.
type Identity struct {
	Name, Email, DefaultBranch string
}

// keys are Identity's git names, in the order they are carried.
func (id Identity) pairs() [][2]string {
	var out [][2]string
	for _, kv := range [][2]string{{"user.name", id.Name}, {"user.email", id.Email}, {"init.defaultBranch", id.DefaultBranch}} {
		if kv[1] != "" {
			out = append(out, kv)
		}
	}
	return out
}

// maxValue bounds one identity value: anything longer is not a name.
const maxValue = 256

// parseIdentity reads text, a git config file, into id: each of the three
// keys it sets replaces id's value, as a later file does in git. Every
// other section and key is skipped unread, include.path too. A value git
// would read otherwise than this parser (a continued line, an unknown
// escape, an unterminated quote) or one holding a control character is
// skipped rather than guessed.
func parseIdentity(text string, id *Identity) {
	section := ""
	for _, raw := range strings.Split(text, "\n") {
		line := strings.TrimSpace(strings.TrimSuffix(raw, "\r"))
		if line == "" || line[0] == '#' || line[0] == ';' {
			continue
		}
		if line[0] == '[' {
			end := strings.IndexByte(line, ']')
			if end < 0 {
				section = ""
				continue
			}
			// A subsection ([user "x"]) is not [user].
			section = strings.ToLower(strings.TrimSpace(line[1:end]))
			line = strings.TrimSpace(line[end+1:])
			if line == "" {
				continue
			}
		}
		k, v, ok := strings.Cut(line, "=")
		if !ok {
			continue
		}
		val, ok := configValue(v)
		if !ok {
			continue
		}
		switch section + "." + strings.ToLower(strings.TrimSpace(k)) {
		case "user.name":
			id.Name = val
		case "user.email":
			id.Email = val
		case "init.defaultbranch":
			id.DefaultBranch = val
		}
	}
}

// configValue decodes a git config value: surrounding blanks dropped,
// quotes removed, \" \\ \t \n \b escapes, a comment after '#' or ';'
// outside quotes. ok is false for what it will not guess at.
func configValue(v string) (string, bool) {
	var b strings.Builder
	quoted, pending := false, ""
	for i := 0; i < len(v); i++ {
		c := v[i]
		switch {
		case c == '"':
			quoted = !quoted
			continue
		case c == '\\':
			if i+1 >= len(v) {
				return "", false // a continued line
			}
			i++
			e, ok := map[byte]byte{'"': '"', '\\': '\\', 't': '\t', 'n': '\n', 'b': '\b'}[v[i]]
			if !ok {
				return "", false
			}
			c = e
		case !quoted && (c == '#' || c == ';'):
			i = len(v)
			continue
		case !quoted && (c == ' ' || c == '\t'):
			pending += string(c)
			continue
		}
		if b.Len() > 0 {
			b.WriteString(pending)
		}
		pending = ""
		b.WriteByte(c)
	}
	s := b.String()
	if quoted || s == "" || len(s) > maxValue || strings.ContainsFunc(s, func(r rune) bool { return r < 0x20 || r == 0x7f }) {
		return "", false
	}
	return s, true
}
