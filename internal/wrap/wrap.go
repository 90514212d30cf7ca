// Package wrap rewrites an MCP client's config file so that each stdio
// server it starts runs through sandbox-run mcp, with a policy fitted to
// the server: its workdir, the registry its launcher fetches from, the
// client's variables passed by name.
//
// Guarantees: Rewrite is pure (bytes in, bytes out); it changes only the
// command and args of the servers it wraps, byte for byte leaving every
// other byte of the file (comments, order, spacing) as it was, and it
// checks that by parsing its own output: the decoded result must equal
// the decoded input with exactly those two fields replaced. Servers that
// are remote (http, sse), already run through sandbox-run, or start a
// container engine are left alone with a note. Apply writes a backup
// beside the file first and replaces the file atomically, keeping its
// mode; Undo puts the backup back byte for byte.
//
// Not guaranteed: that the server works in the sandbox. A server that
// reads or writes paths outside its workdir (a path in its arguments)
// needs --read or --write added by hand; wrap says nothing about them.
package wrap

import (
	"errors"
	"fmt"
	"path/filepath"
	"reflect"
	"sort"
	"strings"
)

// Format is a client's config format.
type Format string

// The formats wrap reads.
const (
	ClaudeProject Format = "claude-code"      // a project's .mcp.json, key mcpServers
	ClaudeUser    Format = "claude-code-user" // ~/.claude.json: mcpServers and projects.PATH.mcpServers
	Codex         Format = "codex"            // ~/.codex/config.toml, [mcp_servers.NAME] tables
	VSCode        Format = "vscode"           // .vscode/mcp.json, key servers
	Cursor        Format = "cursor"           // .cursor/mcp.json, key mcpServers
	ClaudeDesktop Format = "claude-desktop"   // claude_desktop_config.json, key mcpServers
	Gemini        Format = "gemini"           // .gemini/settings.json, key mcpServers
)

// Formats lists every format, for messages.
var Formats = []Format{ClaudeProject, ClaudeUser, Codex, VSCode, Cursor, ClaudeDesktop, Gemini}

// Errors Rewrite returns, for errors.Is.
var (
	ErrFormat       = errors.New("unknown config format")
	ErrParse        = errors.New("config does not parse")
	ErrNoServer     = errors.New("no such server")
	ErrNotWrappable = errors.New("server cannot be wrapped")
	ErrCheck        = errors.New("rewrite check failed")
)

// Options say how to rewrite.
type Options struct {
	// SandboxRun is the sandbox-run the config will start (an absolute
	// path: clients start servers with their own PATH).
	SandboxRun string
	// Server, when set, is the only server rewritten.
	Server string
	// Format overrides detection.
	Format Format
	// Workdir is the workdir of servers the file gives none (user-wide
	// configs); empty leaves them the directory the client starts them in.
	Workdir string
	// Home is the user's home: .cursor and .gemini directories right in
	// it hold user-wide configs, elsewhere a project's.
	Home string
}

// Plan is the outcome of Rewrite.
type Plan struct {
	Format   Format
	Outcomes []Outcome
	Old, New []byte
	edits    []edit
}

// Changed says whether New differs from Old.
func (p *Plan) Changed() bool { return len(p.edits) > 0 }

// edit replaces old[start:end] with text.
type edit struct {
	start, end int
	text       string
}

// Rewrite plans the rewrite of the config at path whose bytes are content.
func Rewrite(path string, content []byte, opts Options) (*Plan, error) {
	f := opts.Format
	if f == "" {
		var err error
		if f, err = Detect(path, content); err != nil {
			return nil, err
		}
	}
	var (
		servers []located
		err     error
	)
	p := &Plan{Format: f, Old: content}
	if f == Codex {
		servers, err = codexServers(content)
	} else {
		servers, err = jsonServers(f, path, content, opts.Home)
	}
	if err != nil {
		return nil, err
	}
	if err := p.fitAll(servers, opts); err != nil {
		return nil, err
	}
	p.New = apply(content, p.edits)
	if err := p.check(servers); err != nil {
		return nil, err
	}
	return p, nil
}

// located is a server and where it lies in the file.
type located struct {
	Server
	project string
	path    []string // keys from the root to the server's table or object
	editFn  func(Outcome) ([]edit, error)
}

func (p *Plan) fitAll(servers []located, opts Options) error {
	found := false
	for _, s := range servers {
		if opts.Server != "" && s.Name != opts.Server {
			continue
		}
		found = true
		project := s.project
		if project == "" {
			project = opts.Workdir
		}
		o := fit(s.Server, project, opts.SandboxRun)
		if opts.Server != "" && !o.Wrapped && !IsWrapped(s.Command) {
			return fmt.Errorf("%w: %s: %s", ErrNotWrappable, s.Name, o.Note)
		}
		if o.Wrapped {
			e, err := s.editFn(o)
			if err != nil {
				if opts.Server != "" {
					return fmt.Errorf("%w: %s: %v", ErrNotWrappable, s.Name, err)
				}
				o.Wrapped, o.Note = false, "left alone: "+err.Error()
			}
			p.edits = append(p.edits, e...)
		}
		p.Outcomes = append(p.Outcomes, o)
	}
	if opts.Server != "" && !found {
		names := make([]string, 0, len(servers))
		for _, s := range servers {
			names = append(names, s.Name)
		}
		return fmt.Errorf("%w %q; the file has: %s", ErrNoServer, opts.Server, strings.Join(names, ", "))
	}
	sort.Slice(p.edits, func(i, j int) bool { return p.edits[i].start < p.edits[j].start })
	return nil
}

// apply returns old with the edits (sorted, not overlapping) made.
func apply(old []byte, edits []edit) []byte {
	var b strings.Builder
	at := 0
	for _, e := range edits {
		b.Write(old[at:e.start])
		b.WriteString(e.text)
		at = e.end
	}
	b.Write(old[at:])
	return []byte(b.String())
}

// check parses New and compares it with Old decoded, the wrapped servers'
// command and args replaced: anything else that moved is a bug, and
// nothing is written.
func (p *Plan) check(servers []located) error {
	decode := decodeJSONC
	if p.Format == Codex {
		decode = decodeTOML
	}
	want, err := decode(p.Old)
	if err != nil {
		return err
	}
	for _, o := range p.Outcomes {
		if !o.Wrapped {
			continue
		}
		for _, s := range servers {
			if s.Name == o.Server.Name && s.Scope == o.Server.Scope {
				set(want, s.path, o)
			}
		}
	}
	got, err := decode(p.New)
	if err != nil {
		return fmt.Errorf("%w: the rewritten file does not parse: %v", ErrCheck, err)
	}
	if !reflect.DeepEqual(want, got) {
		return fmt.Errorf("%w: the rewritten file differs from the original in more than the wrapped servers' command and args", ErrCheck)
	}
	return nil
}

// set puts o's command and args into the server object at path of v.
func set(v any, path []string, o Outcome) {
	for _, k := range path {
		m, _ := v.(map[string]any)
		v = m[k]
	}
	m, _ := v.(map[string]any)
	if m == nil {
		return
	}
	m["command"] = o.Command
	args := make([]any, len(o.Args))
	for i, a := range o.Args {
		args[i] = a
	}
	m["args"] = args
}

// Detect names the format of the config at path from its name and place,
// else from its content.
func Detect(path string, content []byte) (Format, error) {
	base, parent := filepath.Base(path), filepath.Base(filepath.Dir(path))
	switch {
	case base == ".claude.json":
		return ClaudeUser, nil
	case base == ".mcp.json":
		return ClaudeProject, nil
	case base == "claude_desktop_config.json":
		return ClaudeDesktop, nil
	case strings.HasSuffix(base, ".toml"):
		return Codex, nil
	case base == "mcp.json" && parent == ".vscode":
		return VSCode, nil
	case base == "mcp.json" && parent == ".cursor":
		return Cursor, nil
	case base == "settings.json" && parent == ".gemini":
		return Gemini, nil
	}
	if root, err := parseJSONC(content); err == nil {
		switch {
		case root.get("servers") != nil:
			return VSCode, nil
		case root.get("mcpServers") != nil:
			return ClaudeProject, nil
		}
	}
	return "", fmt.Errorf("%w: %s is none of .mcp.json, .claude.json, config.toml, .vscode/mcp.json, .cursor/mcp.json, claude_desktop_config.json, .gemini/settings.json, and holds neither servers nor mcpServers", ErrFormat, path)
}

// ParseFormat checks a format name given by the user.
func ParseFormat(s string) (Format, error) {
	for _, f := range Formats {
		if string(f) == s {
			return f, nil
		}
	}
	names := make([]string, len(Formats))
	for i, f := range Formats {
		names[i] = string(f)
	}
	return "", fmt.Errorf("%w %q: use one of %s", ErrFormat, s, strings.Join(names, ", "))
}
