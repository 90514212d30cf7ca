package wrap

import (
	"path/filepath"
	"sort"
	"strings"

	"github.com/sandbox-run/sandbox-run/policy"
)

// Server is one MCP server as a client's config declares it.
type Server struct {
	Name    string
	Scope   string // where in the file: "" for the top level, else e.g. "project /home/me/app"
	Command string
	Args    []string
	// EnvNames are the variables the client sets for the server (its
	// env block; Codex's env_vars too). Only their names are used.
	EnvNames []string
	Cwd      string
	// Remote is the transport of a server the client reaches over the
	// network (http, sse); empty for stdio.
	Remote string
}

// Outcome says what wrap did with one server.
type Outcome struct {
	Server Server
	// Wrapped is true when the server's command was rewritten.
	Wrapped bool
	// Note says why a server was left alone, or what the rewrite
	// assumed (a workdir taken from the client's start directory).
	Note string
	// Command and Args are the rewritten command, when Wrapped.
	Command string
	Args    []string
}

// launcher is what a server's launcher needs from the network and which
// shared cache speeds it up: the hosts of its package manager's preset,
// and its cache, both from policy's one table of package managers.
type launcher struct {
	hosts []string
	cache string
}

// launcherFor is the launcher of the package manager whose cache is
// called name.
func launcherFor(name string) launcher {
	m, _ := policy.LookupPackageManager(name)
	p, _ := policy.LookupPreset(m.Preset)
	return launcher{hosts: p.Hosts, cache: m.Name}
}

var enginesNames = map[string]bool{"docker": true, "podman": true, "nerdctl": true}

// launcherOf names what command and args need: the registry a package
// runner fetches the server from. ok is false for a plain program, which
// gets no network.
func launcherOf(command string, args []string) (l launcher, ok bool) {
	base := strings.TrimSuffix(strings.TrimSuffix(filepath.Base(command), ".exe"), ".cmd")
	first := ""
	if len(args) > 0 {
		first = args[0]
	}
	switch {
	case base == "npx" || base == "bunx",
		base == "npm" && (first == "exec" || first == "x"),
		(base == "pnpm" || base == "yarn") && first == "dlx":
		return launcherFor("npm"), true
	case base == "uvx", base == "uv" && (first == "run" || first == "tool"):
		return launcherFor("uv"), true
	case base == "pipx":
		return launcherFor("pip"), true
	case base == "go" && first == "run":
		return launcherFor("go"), true
	}
	return launcher{}, false
}

// IsWrapped says whether command already is sandbox-run.
func IsWrapped(command string) bool {
	return strings.TrimSuffix(filepath.Base(command), ".exe") == "sandbox-run"
}

// fit decides what to do with s: the rewritten command runs the server
// through sandbox-run mcp with its workdir (the server's cwd, else
// project; neither: the directory the client starts it in), the
// registry its launcher needs, and the client's variables passed by name.
func fit(s Server, project, sandboxRun string) Outcome {
	o := Outcome{Server: s}
	switch {
	case s.Remote != "":
		o.Note = "left alone: a remote server (" + s.Remote + "), not a process of this machine; nothing to sandbox"
		return o
	case s.Command == "":
		o.Note = "left alone: no command"
		return o
	case IsWrapped(s.Command):
		o.Note = "left alone: already runs through sandbox-run"
		return o
	case enginesNames[filepath.Base(s.Command)]:
		o.Note = "left alone: it starts a container engine (" + filepath.Base(s.Command) +
			"), which cannot run inside sandbox-run's sandbox; run the server's own program under sandbox-run instead, or rely on the container's isolation"
		return o
	}
	args := []string{"mcp"}
	switch wd := workdirOf(s.Cwd, project); wd {
	case "":
		o.Note = "workdir: the directory the client starts the server in (the file names no project); pass --workdir to wrap to fix one"
	default:
		args = append(args, "--workdir", wd)
	}
	if r := scriptDir(s.Command, s.Args); r != "" && !within(r, workdirOf(s.Cwd, project)) {
		args = append(args, "--read", r)
	}
	if l, ok := launcherOf(s.Command, s.Args); ok {
		for _, h := range l.hosts {
			args = append(args, "--allow-host", h)
		}
		args = append(args, "--cache", l.cache)
	}
	env := append([]string(nil), s.EnvNames...)
	sort.Strings(env)
	for _, k := range env {
		// By name: the client keeps setting the value (its env block is
		// left as it is), so no secret lands on sandbox-run's argv.
		args = append(args, "--pass-env", k)
	}
	args = append(args, "--", s.Command)
	o.Wrapped, o.Command, o.Args = true, sandboxRun, append(args, s.Args...)
	return o
}

// workdirOf is the server's cwd made absolute against project, else
// project. A cwd holding a client's variable (${workspaceFolder}) is
// kept as written: the client expands it in args as in cwd.
func workdirOf(cwd, project string) string {
	switch {
	case cwd == "":
		return project
	case filepath.IsAbs(cwd) || strings.Contains(cwd, "${") || project == "":
		return cwd
	}
	return filepath.Join(project, cwd)
}

// interpreters run a script named by their first argument.
var interpreters = map[string]bool{"node": true, "python": true, "python3": true, "deno": true, "bun": true, "ruby": true, "perl": true}

// scriptDir is what the sandbox must read for an interpreter to run the
// script at an absolute path in its args: the directory that holds the
// script's node_modules (the package and its dependencies), else the
// script's own directory. Empty for anything else.
func scriptDir(command string, args []string) string {
	if !interpreters[filepath.Base(command)] {
		return ""
	}
	for _, a := range args {
		if a == "run" && filepath.Base(command) == "deno" {
			continue
		}
		if strings.HasPrefix(a, "-") {
			continue
		}
		if !filepath.IsAbs(a) {
			return ""
		}
		if i := strings.Index(a, "/node_modules/"); i > 0 {
			return a[:i]
		}
		return filepath.Dir(a)
	}
	return ""
}

// within says whether p is dir or lies under it.
func within(p, dir string) bool {
	if dir == "" {
		return false
	}
	rel, err := filepath.Rel(dir, p)
	return err == nil && rel != ".." && !strings.HasPrefix(rel, "../")
}
