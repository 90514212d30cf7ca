package sandboxrun_test

import (
	"os/exec"
	"strings"
	"testing"
)

// TestImportFences keeps the translators and the in-sandbox init free of
// the network and MCP stacks: they must stay small, auditable leaves.
func TestImportFences(t *testing.T) {
	banned := []string{"net/http", "github.com/elazarl/goproxy", "github.com/mark3labs/mcp-go"}
	for _, pkg := range []string{"./policy", "./filter", "./pathguard", "./bwrap", "./gvisor", "./internal/initproc", "./forwarder", "./landlock", "./apparmor"} {
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
