package sandboxrun_test

import (
	"flag"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"slices"
	"strings"
	"testing"
)

// TestImportFences keeps the translators and the in-sandbox init free of
// the network and MCP stacks: they must stay small, auditable leaves.
func TestImportFences(t *testing.T) {
	banned := []string{"net/http", "github.com/elazarl/goproxy", "github.com/mark3labs/mcp-go"}
	for _, pkg := range []string{"./policy", "./allowlist", "./httprule", "./filter", "./pathguard", "./bwrap", "./gvisor", "./internal/initproc", "./forwarder", "./landlock", "./internal/apparmor"} {
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
// policy nothing but allowlist, httprule and internal/limits, so that both
// policy and proxy read an entry the same way and policy stays pure data
// with its rules. internal/limits is itself a leaf: policy applies its
// Validate, the one owner of what a limit may be, instead of a copy.
func TestLeaves(t *testing.T) {
	const mod = "github.com/sandbox-run/sandbox-run"
	for pkg, allowed := range map[string][]string{
		"./allowlist": nil,
		"./httprule":  {mod + "/allowlist"}, // --allow-http rules, read the same way by policy and proxy
		"./policy":    {mod + "/allowlist", mod + "/httprule", mod + "/internal/limits"},
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
		"golang.org/x/net",        // BPF for the seccomp program, DNS messages for the matrix, netutil for mcp --listen
		"gvisor.dev/gvisor",       // the userspace TCP/IP stack behind transparent egress (netstack)
		"golang.org/x/time",       // gVisor's netstack: rate limits
		"golang.org/x/exp",        // gVisor's netstack: generic helpers
		"github.com/google/btree", // gVisor's netstack
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

var updateImports = flag.Bool("update-imports", false, "rewrite testdata/imports.golden from the tree")

// TestImportGraph keeps testdata/imports.golden the module's import graph:
// for each package (Linux and macOS builds together, tests left out), the
// project packages and outside packages it imports. A package that gains
// or loses an import fails here until the golden is rewritten
// (go test . -run TestImportGraph -update-imports), so that every new
// edge is one a reviewer sees in the diff, in the spirit of tailscale's
// depaware.
func TestImportGraph(t *testing.T) {
	got := importGraph(t)
	var b strings.Builder
	for _, pkg := range slices.Sorted(maps.Keys(got)) {
		fmt.Fprintf(&b, "%s:", pkg)
		for _, imp := range got[pkg] {
			fmt.Fprintf(&b, " %s", imp)
		}
		b.WriteString("\n")
	}
	const golden = "testdata/imports.golden"
	if *updateImports {
		if err := os.WriteFile(golden, []byte(b.String()), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(golden)
	if err != nil {
		t.Fatal(err)
	}
	if string(want) != b.String() {
		t.Errorf("the import graph differs from %s; if the change is meant, rerun with -update-imports and review the diff:\n%s", golden, b.String())
	}
}

// TestImportRules holds the graph's rules (DESIGN.md, "Packages"): a leaf
// imports no package of the project but the rule tables every package
// shares (internal/fault, the one what/why/fix error type, itself
// importing nothing of the project), what the mechanisms share imports
// neither package sandbox nor a mechanism, and a mechanism imports no
// other mechanism, nor does the plan (whose layout is package mount's,
// a vocabulary of no mechanism).
func TestImportRules(t *testing.T) {
	g := importGraph(t)
	leaves := []string{"allowlist", "mount", "pathguard", "forwarder", "filter", "internal/apparmor", "landlock", "internal/limits", "internal/fault", "internal/exitcode", "internal/procid"}
	shared := []string{"internal/fault"}
	// What the mechanisms share imports neither the skeleton nor a
	// mechanism: imports point one way.
	mechShared := []string{"internal/protect", "internal/hostwalk", "internal/gitrepo", "internal/plan", "internal/hostnet", "internal/mechanism"}
	mechanisms := []string{"bwrap", "gvisor", "landlock", "seatbelt"}
	for _, pkg := range leaves {
		for _, imp := range g[pkg] {
			if (imp == "." || !strings.Contains(imp, ".")) && imp != pkg && !slices.Contains(shared, imp) {
				t.Errorf("%s is a leaf but imports %s of the project", pkg, imp)
			}
		}
	}
	for _, pkg := range mechShared {
		for _, imp := range g[pkg] {
			if imp == "sandbox" || slices.Contains(mechanisms, imp) || strings.HasPrefix(imp, "internal/mechanism/") {
				t.Errorf("%s is shared by the mechanisms but imports %s", pkg, imp)
			}
		}
	}
	for _, m := range mechanisms {
		for _, imp := range g[m] {
			if slices.Contains(mechanisms, imp) {
				t.Errorf("mechanism %s imports mechanism %s", m, imp)
			}
		}
	}
	// A mechanism is one package under internal/mechanism/: it imports
	// neither the skeleton nor another mechanism, so adding one is one
	// package and no change elsewhere but the skeleton's choice of it.
	n := 0
	for pkg, imps := range g {
		if !strings.HasPrefix(pkg, "internal/mechanism/") {
			continue
		}
		n++
		for _, imp := range imps {
			if imp == "sandbox" || (strings.HasPrefix(imp, "internal/mechanism/") && imp != pkg) {
				t.Errorf("mechanism %s imports %s", pkg, imp)
			}
		}
	}
	if n < 5 {
		t.Errorf("found %d mechanism packages under internal/mechanism/, want bwrap, gvisor, landlock, off and seatbelt", n)
	}
}

// importGraph returns, per package of the module (relative to it), its
// non-test imports that are project packages (relative) or outside the
// standard library (full path), for linux and darwin together.
func importGraph(t *testing.T) map[string][]string {
	t.Helper()
	const mod = "github.com/sandbox-run/sandbox-run"
	g := map[string][]string{}
	for _, goos := range []string{"linux", "darwin"} {
		cmd := exec.Command("go", "list", "-f", `{{.ImportPath}}{{range .Imports}} {{.}}{{end}}`, "./...")
		cmd.Env = append(os.Environ(), "GOOS="+goos)
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("go list (GOOS=%s): %v", goos, err)
		}
		for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
			f := strings.Fields(line)
			pkg := strings.TrimPrefix(strings.TrimPrefix(f[0], mod), "/")
			if pkg == "" {
				pkg = "."
			}
			for _, imp := range f[1:] {
				switch {
				case imp == mod:
					imp = "."
				case strings.HasPrefix(imp, mod+"/"):
					imp = strings.TrimPrefix(imp, mod+"/")
				case !strings.Contains(strings.Split(imp, "/")[0], "."):
					continue // the standard library
				}
				if !slices.Contains(g[pkg], imp) {
					g[pkg] = append(g[pkg], imp)
				}
			}
			if _, ok := g[pkg]; !ok {
				g[pkg] = nil
			}
		}
	}
	for _, imps := range g {
		slices.Sort(imps)
	}
	return g
}

// TestPublicPackages keeps the public surface to the packages a library
// user or another tool needs (issue 35): every other package is under
// internal/. A new public package is a decision: add it here with why.
func TestPublicPackages(t *testing.T) {
	public := map[string]string{
		".":                    "the escape matrix (egress-cases.json), embedded",
		"policy":               "the one value describing what a sandbox may do",
		"allowlist":            "the allow-list syntax policy's values are written in",
		"httprule":             "the --allow-http rules policy's values are written in",
		"sandbox":              "running a command under a policy",
		"report":               "what a run had in force: the contract a harness parses",
		"mcp":                  "the MCP relay as a library",
		"proxy":                "the egress proxy a node runs (sandbox-run proxy)",
		"proxy/secret":         "the phantom tokens a proxy swaps",
		"bwrap":                "the policy as bubblewrap's arguments",
		"mount":                "the layout's steps that bwrap and gvisor translate, a vocabulary of neither",
		"seatbelt":             "the policy as a Seatbelt profile",
		"landlock":             "the policy as a Landlock ruleset",
		"gvisor":               "the policy as an OCI spec for runsc",
		"pathguard":            "path resolution without following links",
		"filter":               "the seccomp deny-list",
		"forwarder":            "the loopback-to-socket relay inside the sandbox",
		"cmd/sandbox-run":      "the command",
		"cmd/sandbox-run-init": "the sandbox's init",
	}
	out, err := exec.Command("go", "list", "./...").Output()
	if err != nil {
		t.Fatal(err)
	}
	const mod = "github.com/sandbox-run/sandbox-run"
	seen := map[string]bool{}
	for _, p := range strings.Fields(string(out)) {
		rel := strings.TrimPrefix(strings.TrimPrefix(p, mod), "/")
		if rel == "" {
			rel = "."
		}
		if rel == "internal" || strings.HasPrefix(rel, "internal/") || strings.Contains(rel, "/internal/") || rel == "e2e" || strings.HasPrefix(rel, "scripts/") {
			continue
		}
		seen[rel] = true
		if public[rel] == "" {
			t.Errorf("%s is public: move it under internal/, or name here why a library user needs it", rel)
		}
	}
	for rel := range public {
		if !seen[rel] {
			t.Errorf("%s is listed as public but is not a package", rel)
		}
	}
}
