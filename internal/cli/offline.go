package cli

import (
	"fmt"
	"io"
	"path/filepath"
	"strings"

	"github.com/sandbox-run/sandbox-run/policy"
	"github.com/sandbox-run/sandbox-run/report"
	"github.com/sandbox-run/sandbox-run/sandbox"
)

// netTool is what the no-network note says of a package manager or
// fetcher: the hosts that would let it reach its registry, and the
// offline settings sandbox-run gave it (empty: it does not retry, so it
// fails at once on its own).
type netTool struct{ hosts, settings string }

// presetHosts spells a preset's hosts (policy's one table of registry
// hosts) as the --allow-host flags that allow them.
func presetHosts(name string) string {
	p, _ := policy.LookupPreset(name)
	return strings.Join(p.Hosts, " --allow-host ")
}

// netToolNamed returns what the note says of the program name: a package
// manager's fetcher from policy's one table of package managers (its
// preset's hosts, its offline settings), else one of the fetchers that
// are no package manager.
func netToolNamed(name string) (netTool, bool) {
	if m, ok := policy.FetcherOf(name); ok {
		return netTool{presetHosts(m.Preset), strings.Join(m.Offline, ", ")}, true
	}
	t, ok := otherNetTools[name]
	return t, ok
}

// otherNetTools are the common fetchers that are no package manager, by
// program name.
var otherNetTools = map[string]netTool{
	"git": {"github.com (the remote's host)", ""}, "curl": {"HOST", ""}, "wget": {"HOST", ""},
}

// netToolOf names the tool cmd runs: its program, or the module of
// "python3 -m pip" and the like.
func netToolOf(cmd []string) (string, netTool, bool) {
	name := filepath.Base(cmd[0])
	if strings.HasPrefix(name, "python") && len(cmd) > 2 && cmd[1] == "-m" {
		name = cmd[2]
	}
	t, ok := netToolNamed(name)
	if ok && name == "git" && !gitNetwork[gitSubcommand(cmd[1:])] {
		// git config, commit, status...: a failure there is not the
		// network's.
		return name, t, false
	}
	return name, t, ok
}

// gitNetwork are git's subcommands that reach a remote.
var gitNetwork = map[string]bool{"clone": true, "fetch": true, "pull": true, "push": true, "ls-remote": true, "submodule": true, "remote": true, "archive": true}

// gitSubcommand is the first argument after git's own options (-C DIR
// and -c NAME=VALUE take a value); "" when there is none.
func gitSubcommand(args []string) string {
	for i := 0; i < len(args); i++ {
		switch a := args[i]; {
		case a == "-C" || a == "-c" || a == "--git-dir" || a == "--work-tree" || a == "--namespace":
			i++
		case strings.HasPrefix(a, "-"):
		default:
			return a
		}
	}
	return ""
}

// printOffline says, after a failed run of a package manager or fetcher in
// a sandbox without egress, that the sandbox has no network and how to
// allow a host: the tool's own error (EAI_AGAIN, ENOTCACHED, "Could not
// resolve host", pip's "from versions: none") does not say why. The
// command's own failure statuses count (the report's exit class
// "exited"), 128 among them (git's fatal errors; a signal is 128+N with
// N >= 1); sandbox-run's 124 to 127 and deaths by signal do not.
func printOffline(w io.Writer, cmd []string, res *sandbox.Result) {
	if res == nil || len(cmd) == 0 {
		return
	}
	if c := res.ExitCode; c == 0 || (c >= ExitTimeout && c != 128) {
		return
	}
	if e := res.Report.Exit; e != nil && e.Class != report.ClassExited {
		return // a limit, the timeout, a signal or a cancel ended it
	}
	if n := res.Report.Network; n != "none" && n != "llm only" {
		return
	}
	name, t, ok := netToolOf(cmd)
	if !ok {
		return
	}
	how := "it does not retry, so it failed at once"
	if t.settings != "" {
		how = "it was set to fail at once offline (" + t.settings + ")"
	}
	fmt.Fprintf(w, "sandbox-run: note: the sandbox has no network (no --allow-host given): %s could not reach its hosts; %s; fix: if it needed the network, allow its hosts, e.g. --allow-host %s\n",
		name, how, t.hosts)
}
