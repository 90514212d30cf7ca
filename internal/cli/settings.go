package cli

import (
	"fmt"
	"io"
	"os"
	"sort"
	"strings"

	"github.com/sandbox-run/sandbox-run/pathguard"
	"github.com/sandbox-run/sandbox-run/policy"
)

// readSettingsFile reads a settings file by its real path, without
// following a link.
func readSettingsFile(flag, file string) ([]byte, string, error) {
	path, err := hostPath(flag, file)
	if err != nil {
		return nil, "", err
	}
	fh, err := pathguard.OpenFile(path, os.O_RDONLY, 0)
	if err != nil {
		return nil, "", fmt.Errorf("--%s %s: %v; fix: pass a readable settings file by its real path", flag, path, err)
	}
	defer fh.Close()
	b, err := io.ReadAll(io.LimitReader(fh, policy.MaxProfileSize+1))
	if err != nil {
		return nil, "", fmt.Errorf("--%s %s: %v; fix: pass a readable settings file", flag, path, err)
	}
	return b, path, nil
}

// settingsBase is where the settings' paths are resolved: the workdir,
// the caller's home, the settings file's project.
func settingsBase(workdir, path string) policy.SettingsBase {
	home, _ := os.UserHomeDir()
	return policy.SettingsBase{Workdir: workdir, Home: home, Root: policy.SettingsRoot(path)}
}

// applySettingsAndPresets reads --settings onto p (after the profile and
// the flags: the file adds hosts and paths) and then applies the presets.
func (f *runFlags) applySettingsAndPresets(p policy.Policy) (policy.Policy, error) {
	if f.settings != "" {
		b, path, err := readSettingsFile("settings", f.settings)
		if err != nil {
			return p, err
		}
		s, err := policy.ParseSettings(policy.DetectSettingsFormat(b), b, settingsBase(p.Workdir, path), p)
		if err != nil {
			return p, fmt.Errorf("--settings %s: %w", path, err)
		}
		p = s.Policy
	}
	return policy.ApplyPresets(p)
}

// importCmd is `sandbox-run import srt|claude FILE [--workdir DIR]`: the
// profile that holds what FILE says, on stdout; what became of each key,
// on stderr.
func importCmd(args []string, stdio IO) int {
	const use = "usage: sandbox-run import srt|claude FILE [--workdir DIR]"
	f := newRunFlags()
	if len(args) < 2 {
		return fail(stdio.Stderr, fmt.Errorf("%s; fix: name the format and the file", use))
	}
	format := policy.SettingsFormat(args[0])
	if format != policy.FormatSrt && format != policy.FormatClaude {
		return fail(stdio.Stderr, fmt.Errorf("import: %q is not a settings format; fix: sandbox-run import srt FILE or sandbox-run import claude FILE", args[0]))
	}
	if err := f.fs.Parse(args[2:]); err != nil || len(f.fs.Args()) > 0 {
		return fail(stdio.Stderr, fmt.Errorf("%s; fix: pass only --workdir after the file", use))
	}
	b, path, err := readSettingsFile("import", args[1])
	if err != nil {
		return fail(stdio.Stderr, err)
	}
	wd := f.workdir
	if wd == "" {
		if wd, err = os.Getwd(); err != nil {
			return fail(stdio.Stderr, fmt.Errorf("cannot read the current directory: %w; fix: pass --workdir DIR", err))
		}
	}
	if wd, err = absPath("workdir", wd); err != nil {
		return fail(stdio.Stderr, err)
	}
	s, err := policy.ParseSettings(format, b, settingsBase(wd, path), policy.Policy{Workdir: wd})
	for _, k := range s.Keys {
		fmt.Fprintf(stdio.Stderr, "%-15s %s: %s\n", k.Status, k.Key, k.Detail)
	}
	if err != nil {
		return fail(stdio.Stderr, err)
	}
	out, err := s.Profile()
	if err != nil {
		return fail(stdio.Stderr, err)
	}
	_, _ = stdio.Stdout.Write(out)
	return 0
}

// presetsCmd is `sandbox-run presets`: what each preset allows.
func presetsCmd(args []string, stdio IO) int {
	if len(args) > 0 {
		return fail(stdio.Stderr, fmt.Errorf("presets takes no arguments; fix: sandbox-run presets"))
	}
	for _, p := range policy.Presets() {
		fmt.Fprintf(stdio.Stdout, "%-10s %s\n", p.Name, p.What)
		fmt.Fprintf(stdio.Stdout, "%-10s   hosts: %s\n", "", strings.Join(p.Hosts, " "))
		for _, k := range sortedKeys(p.Env) {
			fmt.Fprintf(stdio.Stdout, "%-10s   env:   %s=%s\n", "", k, p.Env[k])
		}
		if p.Note != "" {
			fmt.Fprintf(stdio.Stdout, "%-10s   note:  %s\n", "", p.Note)
		}
	}
	return 0
}

// schemaCmd is `sandbox-run schema`: the profile's JSON Schema.
func schemaCmd(args []string, stdio IO) int {
	if len(args) > 0 {
		return fail(stdio.Stderr, fmt.Errorf("schema takes no arguments; fix: sandbox-run schema"))
	}
	b, err := policy.Schema()
	if err != nil {
		return fail(stdio.Stderr, err)
	}
	fmt.Fprintf(stdio.Stdout, "%s\n", b)
	return 0
}

func sortedKeys(m map[string]string) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}
