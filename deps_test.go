package sandboxrun_test

import (
	"os/exec"
	"slices"
	"strings"
	"testing"
)

// TestImportFences keeps the translators and the in-sandbox init free of
// the network and MCP stacks: they must stay small, auditable leaves.
func TestImportFences(t *testing.T) {
	banned := []string{"net/http", "github.com/elazarl/goproxy", "github.com/mark3labs/mcp-go"}
	for _, pkg := range []string{"./policy", "./allowlist", "./filter", "./pathguard", "./bwrap", "./gvisor", "./internal/initproc", "./forwarder", "./landlock", "./apparmor"} {
		out, err := exec.Command("go", "list", "-deps", pkg).Output()
		if err != nil {
			t.Fatalf("go list %s: %v", pkg, err)
		}
		for _, dep := range strings.Fields(string(out)) {
			for _, b := range banned {
				if dep == b || strings.HasPrefix(dep, b+"/") {
					t.Errorf("%s imports %s", pkg, dep)
				}
			}
		}
	}
}

// TestLeaves keeps the value packages leaves of the module: allowlist (the
// allow-list syntax and address classes) imports nothing of the module, and
// policy nothing but allowlist, so that both policy and proxy read an
// entry the same way and policy stays pure data with its rules.
func TestLeaves(t *testing.T) {
	const mod = "github.com/sandbox-run/sandbox-run"
	for pkg, allowed := range map[string][]string{
		"./allowlist": nil,
		"./policy":    {mod + "/allowlist"},
	} {
		out, err := exec.Command("go", "list", "-deps", pkg).Output()
		if err != nil {
			t.Fatalf("go list %s: %v", pkg, err)
		}
		self := mod + strings.TrimPrefix(pkg, ".")
		for _, dep := range strings.Fields(string(out)) {
			if dep == self || !strings.HasPrefix(dep, mod+"/") && dep != mod {
				continue
			}
			if !slices.Contains(allowed, dep) {
				t.Errorf("%s imports %s; it must stay a leaf (allowed: %v)", pkg, dep, allowed)
			}
		}
	}
}

// TestBinaryModules keeps what sandbox-run's binary links to a short,
// known list of modules. Every package linked runs its initialisers at
// every start of sandbox-run, before anything is sandboxed: an MCP SDK
// (the relay needs only the protocol's names), an HTTP proxy library (the
// proxy is the standard library's server and transport) and a version
// parser (bwrap's numbers are three integers) each cost a start-up, and
// each is more code on the host side of the boundary. A new module
// belongs in this list only with a reason.
func TestBinaryModules(t *testing.T) {
	allowed := []string{
		"github.com/sandbox-run/sandbox-run",
		"github.com/landlock-lsm/go-landlock",           // --sandbox landlock
		"kernel.org/pub/linux/libs/security/libcap/psx", // go-landlock's all-threads syscalls
		"github.com/spf13/pflag",                        // the command line
		"golang.org/x/sys",
		"golang.org/x/net", // BPF for the seccomp program, DNS messages for the matrix, netutil for mcp --listen
		// sandbox-run wrap: decodes Codex's config.toml to check its own line edits.
		"github.com/BurntSushi/toml",
	}
	out, err := exec.Command("go", "list", "-deps", "-f", "{{if .Module}}{{.Module.Path}}{{end}}", "./cmd/sandbox-run").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	for _, m := range strings.Fields(string(out)) {
		if !slices.Contains(allowed, m) {
			t.Errorf("sandbox-run links module %s, which is not on the list", m)
		}
	}
}
