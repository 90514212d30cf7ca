package cli

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/spf13/pflag"

	"github.com/sandbox-run/sandbox-run/internal/wrap"
)

const wrapUsage = `usage: sandbox-run wrap [--dry-run] [--undo] [--server NAME] [CONFIG]
Rewrites an MCP client's config so that each stdio server runs through sandbox-run mcp,
with its workdir and the registry its launcher needs; the original is kept beside it
(CONFIG` + wrap.BackupSuffix + `) and --undo puts it back. CONFIG: .mcp.json, ~/.claude.json,
~/.codex/config.toml, .vscode/mcp.json, .cursor/mcp.json, claude_desktop_config.json,
.gemini/settings.json (default: the one project config in the current directory).
`

// wrapCmd is `sandbox-run wrap [flags] [CONFIG]`.
func wrapCmd(_ context.Context, args []string, stdio IO) int {
	fs := pflag.NewFlagSet("wrap", pflag.ContinueOnError)
	fs.SortFlags = false
	dryRun := fs.Bool("dry-run", false, "print the change as a unified diff; write nothing")
	undo := fs.Bool("undo", false, "put the backup an earlier wrap made back in place, byte for byte")
	server := fs.String("server", "", "wrap only this server")
	format := fs.String("format", "", "the config's format, when its name does not say: "+formatNames())
	workdir := fs.String("workdir", "", "workdir for servers of a user-wide config, which names no project (default: the directory the client starts them in)")
	self := fs.String("sandbox-run", "", "the sandbox-run the config starts (default: this one's absolute path)")
	strict(fs, "server", "format", "workdir", "sandbox-run")
	fs.SetOutput(stdio.Stderr)
	fs.Usage = func() { fmt.Fprint(stdio.Stderr, wrapUsage); fs.PrintDefaults() }
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, pflag.ErrHelp) {
			return 0
		}
		return fail(stdio.Stderr, fmt.Errorf("%v; fix: %s", err, parseFix(fs, args, "wrap")))
	}
	if fs.NArg() > 1 {
		return fail(stdio.Stderr, fmt.Errorf("more than one config (%s); fix: wrap one file at a time", strings.Join(fs.Args(), " ")))
	}
	cwd, _ := os.Getwd()
	path, err := wrap.Locate(fs.Arg(0), cwd)
	if err != nil {
		return fail(stdio.Stderr, fmt.Errorf("%v; fix: name the config, e.g. sandbox-run wrap ~/.claude.json", err))
	}
	if *undo {
		if err := wrap.Undo(path); err != nil {
			return fail(stdio.Stderr, fmt.Errorf("undo %s: %v; fix: restore the file by hand", path, err))
		}
		fmt.Fprintf(stdio.Stderr, "sandbox-run: restored %s from %s\n", path, wrap.Backup(path))
		return 0
	}
	opts, err := wrapOptions(*format, *server, *workdir, *self)
	if err != nil {
		return fail(stdio.Stderr, err)
	}
	return wrapFile(stdio, path, opts, *dryRun)
}

func formatNames() string {
	s := make([]string, len(wrap.Formats))
	for i, f := range wrap.Formats {
		s[i] = string(f)
	}
	return strings.Join(s, ", ")
}

func wrapOptions(format, server, workdir, self string) (wrap.Options, error) {
	opts := wrap.Options{Server: server}
	if format != "" {
		f, err := wrap.ParseFormat(format)
		if err != nil {
			return opts, fmt.Errorf("--format: %v", err)
		}
		opts.Format = f
	}
	if workdir != "" {
		wd, err := absPath("workdir", workdir)
		if err != nil {
			return opts, err
		}
		opts.Workdir = wd
	}
	if self == "" {
		exe, err := os.Executable()
		if err == nil {
			self, err = filepath.EvalSymlinks(exe)
		}
		if err != nil {
			return opts, fmt.Errorf("cannot tell where this sandbox-run is: %v; fix: pass --sandbox-run PATH", err)
		}
	}
	opts.SandboxRun = self
	opts.Home, _ = os.UserHomeDir()
	return opts, nil
}

func wrapFile(stdio IO, path string, opts wrap.Options, dryRun bool) int {
	old, err := os.ReadFile(path)
	if err != nil {
		return fail(stdio.Stderr, fmt.Errorf("%v; fix: name a config you can read", err))
	}
	p, err := wrap.Rewrite(path, old, opts)
	if err != nil {
		return fail(stdio.Stderr, fmt.Errorf("%s: %v; fix: correct the file or pass --format/--server", path, err))
	}
	for _, o := range p.Outcomes {
		name := o.Server.Name
		if o.Server.Scope != "" {
			name = o.Server.Scope + ": " + name
		}
		switch {
		case o.Wrapped && o.Note != "":
			fmt.Fprintf(stdio.Stderr, "sandbox-run: wrap: %s: wrapped; %s\n", name, o.Note)
		case o.Wrapped:
			fmt.Fprintf(stdio.Stderr, "sandbox-run: wrap: %s: wrapped\n", name)
		default:
			fmt.Fprintf(stdio.Stderr, "sandbox-run: wrap: %s: %s\n", name, o.Note)
		}
	}
	if dryRun {
		fmt.Fprint(stdio.Stdout, p.Diff(path))
		return 0
	}
	if !p.Changed() {
		fmt.Fprintf(stdio.Stderr, "sandbox-run: wrap: nothing to change in %s\n", path)
		return 0
	}
	if err := wrap.Apply(path, p); err != nil {
		fix := "retry"
		if errors.Is(err, wrap.ErrBackupExists) {
			fix = "sandbox-run wrap --undo " + path + " first (it restores the file as it was before that wrap), or move the backup away"
		}
		return fail(stdio.Stderr, fmt.Errorf("%v; fix: %s", err, fix))
	}
	fmt.Fprintf(stdio.Stderr, "sandbox-run: wrap: wrote %s (the original is in %s; sandbox-run wrap --undo %s puts it back)\n", path, wrap.Backup(path), path)
	return 0
}
