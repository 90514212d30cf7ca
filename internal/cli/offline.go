package cli

import (
	"fmt"
	"io"
	"path/filepath"
	"strings"

	"github.com/sandbox-run/sandbox-run/sandbox"
)

// netToolHosts are the hosts that the common package managers and fetchers
// reach by default, for the fix in the no-network note.
var netToolHosts = map[string]string{
	"npm": "registry.npmjs.org", "npx": "registry.npmjs.org", "pnpm": "registry.npmjs.org", "yarn": "registry.npmjs.org",
	"pip": "pypi.org --allow-host files.pythonhosted.org", "pip3": "pypi.org --allow-host files.pythonhosted.org",
	"uv": "pypi.org --allow-host files.pythonhosted.org", "uvx": "pypi.org --allow-host files.pythonhosted.org",
	"go":    "proxy.golang.org --allow-host sum.golang.org",
	"cargo": "index.crates.io --allow-host static.crates.io",
	"git":   "github.com (the remote's host)", "curl": "HOST", "wget": "HOST",
}

// printOffline says, after a failed run of a package manager or fetcher in
// a sandbox without egress, that the sandbox has no network and how to
// allow a host: the tool's own error (EAI_AGAIN, ENOTCACHED, "Could not
// resolve host") does not say why.
func printOffline(w io.Writer, cmd []string, res *sandbox.Result) {
	if res == nil || res.ExitCode == 0 || res.ExitCode >= ExitRefused || len(cmd) == 0 {
		return
	}
	if n := res.Report.Network; n != "none" && n != "llm only" {
		return
	}
	hosts, ok := netToolHosts[filepath.Base(cmd[0])]
	if !ok {
		return
	}
	fmt.Fprintf(w, "sandbox-run: note: the sandbox has no network (no --allow-host given): %s was set to fail at once offline (%s); fix: if it needed the network, allow its hosts, e.g. --allow-host %s\n",
		filepath.Base(cmd[0]), strings.Join(offlineNames(), ", "), hosts)
}

func offlineNames() []string {
	return []string{"npm_config_offline", "PIP_RETRIES=0", "UV_OFFLINE", "CARGO_NET_OFFLINE", "GOPROXY=off"}
}
