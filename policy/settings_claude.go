package policy

import (
	"encoding/json"
	"fmt"
	"path/filepath"
	"strings"
)

// Claude Code's settings.json as its sandbox reads it: the "sandbox"
// block (the keys of code.claude.com/docs/en/settings, "Sandbox
// settings") and the permission rules the sandbox takes its paths and
// hosts from (Read and Edit rules, WebFetch domain rules). Every other
// key of settings.json configures Claude Code, not the sandbox.

var claudeKeys = map[string]handler{
	"sandbox":     object(claudeSandboxKeys),
	"permissions": object(claudePermissionKeys),
	"*":           notApplicable("not a sandbox setting: it configures Claude Code"),
}

var claudeSandboxKeys = map[string]handler{
	"enabled":                      heldBool("sandbox-run always runs the command in a sandbox"),
	"failIfUnavailable":            heldBool("sandbox-run never runs a command unsandboxed when the sandbox cannot be set up (exit 125)"),
	"autoAllowBashIfSandboxed":     notApplicable("Claude Code's approval prompts"),
	"excludedCommands":             weakensIfAny("the commands named would run outside the sandbox"),
	"allowUnsandboxedCommands":     weakensIfTrue("a command could ask to run outside the sandbox (dangerouslyDisableSandbox)"),
	"network":                      object(claudeNetworkKeys),
	"filesystem":                   object(claudeFilesystemKeys),
	"ignoreViolations":             notApplicable(violations),
	"enableWeakerNestedSandbox":    srtKeys["enableWeakerNestedSandbox"],
	"enableWeakerNetworkIsolation": srtKeys["enableWeakerNetworkIsolation"],
}

var claudeNetworkKeys = map[string]handler{
	"allowedDomains":          hostList(false),
	"deniedDomains":           hostList(true),
	"allowManagedDomainsOnly": heldBool("only this file is read: its hosts are the whole allow-list"),
	"allowUnixSockets":        needs("unix-socket"),
	"allowAllUnixSockets":     srtNetworkKeys["allowAllUnixSockets"],
	"allowLocalBinding":       localBinding,
	"httpProxyPort":           srtNetworkKeys["httpProxyPort"],
	"socksProxyPort":          srtNetworkKeys["socksProxyPort"],
}

var claudeFilesystemKeys = map[string]handler{
	"allowWrite":                pathList(func(s *settingsRun) *[]pathEntry { return &s.allowWrite }, resolveClaudeSandbox),
	"denyWrite":                 pathList(func(s *settingsRun) *[]pathEntry { return &s.denyWrite }, resolveClaudeSandbox),
	"denyRead":                  pathList(func(s *settingsRun) *[]pathEntry { return &s.denyRead }, resolveClaudeSandbox),
	"allowRead":                 pathList(func(s *settingsRun) *[]pathEntry { return &s.allowRead }, resolveClaudeSandbox),
	"allowManagedReadPathsOnly": heldBool("only this file is read: its paths are the whole list"),
}

var claudePermissionKeys = map[string]handler{
	"allow": permissionRules(false),
	"deny":  permissionRules(true),
	"ask":   notApplicable("Claude Code's approval prompts"),
	"*":     notApplicable("Claude Code's permission settings, not the sandbox's"),
}

// resolveClaudeSandbox spells the paths of sandbox.filesystem: "//path"
// and "/path" are absolute, "~/path" is in the home, any other path is
// relative to the project (the workdir).
func resolveClaudeSandbox(b SettingsBase, p string) (string, error) {
	if strings.HasPrefix(p, "//") {
		p = p[1:]
	}
	return resolveSrt(b, p)
}

// resolveClaudeRule spells a Read or Edit rule's path: "//path" is
// absolute, "~/path" is in the home, "/path" is relative to the settings
// file's project (Root), any other path to the current directory.
func resolveClaudeRule(b SettingsBase, p string) (string, error) {
	switch {
	case strings.HasPrefix(p, "//"):
		p = p[1:]
	case strings.HasPrefix(p, "/"):
		if b.Root == "" {
			return "", fmt.Errorf("the settings file's directory is not known")
		}
		p = filepath.Join(b.Root, p)
	}
	return resolveSrt(b, p)
}

// permissionRules reads a list of rules: Read(path), Edit(path) and
// WebFetch(domain:host) become the sandbox's paths and hosts, as Claude
// Code's sandbox takes them; rules for other tools are its prompts.
func permissionRules(deny bool) handler {
	return func(s *settingsRun, key string, raw json.RawMessage) error {
		v, err := stringList(key, raw)
		if err != nil {
			return err
		}
		var other []string
		for i, r := range v {
			k := fmt.Sprintf("%s[%d]", key, i)
			tool, arg, hasArg := strings.Cut(strings.TrimSuffix(r, ")"), "(")
			if hasArg && !strings.HasSuffix(r, ")") {
				return &SettingsError{Key: k, Reason: fmt.Sprintf("%q is not Tool(argument)", r), Fix: "close the parenthesis"}
			}
			switch {
			case tool == "WebFetch" && strings.HasPrefix(arg, "domain:"):
				h := hostEntry{key: k, host: strings.TrimPrefix(arg, "domain:")}
				if deny {
					s.denyHosts = append(s.denyHosts, h)
				} else {
					s.allowHosts = append(s.allowHosts, h)
				}
			case (tool == "Read" || tool == "Edit") && hasArg && arg != "" && arg != "*" && arg != "**":
				s.rulePath(k, tool, arg, deny)
			case (tool == "Read" || tool == "Edit") && deny:
				return &SettingsError{Key: k, Reason: fmt.Sprintf("%q denies every path, which no command can run under", r), Fix: "name the paths to deny"}
			default:
				other = append(other, r)
			}
		}
		if len(other) > 0 {
			s.note(key, StatusNotApplicable, "%s: Claude Code's own tool permissions, not the sandbox's", strings.Join(other, ", "))
		}
		return nil
	}
}

func (s *settingsRun) rulePath(k, tool, arg string, deny bool) {
	p, err := resolveClaudeRule(s.base, arg)
	if err != nil {
		s.refuse(&SettingsError{Key: k, Reason: fmt.Sprintf("%q: %v", arg, err), Fix: pathFix(err, "write //absolute, ~/path, /project-path or ./path")})
		return
	}
	e := pathEntry{key: k, spelled: arg, path: p}
	switch {
	case tool == "Read" && deny:
		s.denyRead = append(s.denyRead, e)
	case tool == "Read":
		s.allowRead = append(s.allowRead, e)
	case deny:
		s.denyWrite = append(s.denyWrite, e)
	default:
		s.allowWrite = append(s.allowWrite, e)
	}
}
