package gitrepo

import (
	"strings"
)

// gitKeep is the allow-list of git settings a git directory the command
// created keeps: what init, clone, remote, branch and submodule write, none
// of which runs a program. Everything else (core.fsmonitor, core.hooksPath,
// core.sshCommand, core.editor, filter.*, diff.*, alias.*, include.*,
// remote.*.uploadpack, submodule.*.update, ...) is removed. Keys are
// lowercase section.key, with "*" for any subsection.
var gitKeep = map[string]bool{
	"core.repositoryformatversion": true, "core.filemode": true, "core.bare": true,
	"core.logallrefupdates": true, "core.ignorecase": true, "core.precomposeunicode": true,
	"core.symlinks": true, "core.worktree": true, "core.autocrlf": true, "core.eol": true,
	"extensions.objectformat": true, "extensions.refstorage": true, "extensions.worktreeconfig": true,
	"remote.*.url": true, "remote.*.pushurl": true, "remote.*.fetch": true, "remote.*.push": true,
	"remote.*.tagopt": true, "remote.*.prune": true, "remote.*.mirror": true,
	"branch.*.remote": true, "branch.*.merge": true, "branch.*.rebase": true, "branch.*.pushremote": true,
	"user.name": true, "user.email": true, "init.defaultbranch": true,
	"submodule.*.url": true, "submodule.*.active": true, "submodule.*.branch": true,
}

// StripConfig returns the settings of a git config file that gitKeep
// allows, rewritten in canonical form, and whether anything was dropped.
// It is deliberately strict: a variable whose value needs quoting or
// escaping, a continued line, an odd section header, is dropped rather
// than interpreted, since what git would make of it is what matters.
func StripConfig(in string) (out string, dropped bool) {
	var b strings.Builder
	section, sub, okHeader := "", "", false
	lastHeader := ""
	cont := false
	for _, raw := range strings.Split(in, "\n") {
		line := strings.TrimSpace(raw)
		if cont {
			// The previous line ended in a backslash: this one continues a
			// value that was dropped.
			cont = strings.HasSuffix(line, `\`)
			continue
		}
		if line == "" || line[0] == '#' || line[0] == ';' {
			continue
		}
		if line[0] == '[' {
			end := strings.IndexByte(line, ']')
			if end < 0 {
				dropped, okHeader = true, false
				continue
			}
			section, sub, okHeader = parseHeader(line[1:end])
			if !okHeader {
				dropped = true
			}
			line = strings.TrimSpace(line[end+1:])
			if line == "" || line[0] == '#' || line[0] == ';' {
				continue
			}
		}
		if strings.HasSuffix(line, `\`) {
			cont, dropped = true, true
			continue
		}
		key, val, ok := parseVar(line)
		if !okHeader || !ok || !keepVar(section, sub, key) {
			dropped = true
			continue
		}
		h := "[" + section + "]"
		if sub != "" {
			h = "[" + section + ` "` + sub + `"]`
		}
		if h != lastHeader {
			b.WriteString(h + "\n")
			lastHeader = h
		}
		if val == "" {
			b.WriteString("\t" + key + "\n")
		} else {
			b.WriteString("\t" + key + " = " + val + "\n")
		}
	}
	return b.String(), dropped
}

func keepVar(section, sub, key string) bool {
	if sub != "" {
		return gitKeep[section+".*."+key]
	}
	return gitKeep[section+"."+key]
}

// parseHeader reads `section`, `section "sub"` or the old `section.sub`.
// Section names are case-insensitive; a subsection is kept only when it
// needs no escaping.
func parseHeader(h string) (section, sub string, ok bool) {
	h = strings.TrimSpace(h)
	if i := strings.IndexByte(h, ' '); i >= 0 {
		section = strings.ToLower(h[:i])
		q := strings.TrimSpace(h[i+1:])
		if len(q) < 2 || q[0] != '"' || q[len(q)-1] != '"' {
			return "", "", false
		}
		sub = q[1 : len(q)-1]
	} else if i := strings.IndexByte(h, '.'); i >= 0 {
		section, sub = strings.ToLower(h[:i]), strings.ToLower(h[i+1:])
	} else {
		section = strings.ToLower(h)
	}
	if !plainName(section, false) || (sub != "" && !plainName(sub, true)) {
		return "", "", false
	}
	return section, sub, true
}

// parseVar reads `key = value` or a bare `key` (true). The value must not
// need quoting: no quote, backslash or comment character.
func parseVar(line string) (key, val string, ok bool) {
	k, v, hasVal := strings.Cut(line, "=")
	key = strings.ToLower(strings.TrimSpace(k))
	if !plainName(key, false) || strings.ContainsAny(key, ".") {
		return "", "", false
	}
	if !hasVal {
		return key, "", true
	}
	val = strings.TrimSpace(v)
	if val == "" || strings.ContainsAny(val, "\"\\#;\r\t") {
		return "", "", false
	}
	return key, val, true
}

// plainName: letters, digits and '-' (and, for a subsection, the
// characters of a remote name, a branch name or a URL).
func plainName(s string, subsection bool) bool {
	if s == "" {
		return false
	}
	for _, c := range s {
		switch {
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9', c == '-':
		case subsection && strings.ContainsRune("._/:@+", c):
		default:
			return false
		}
	}
	return true
}
