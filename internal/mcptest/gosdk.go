package mcptest

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sandbox-run/sandbox-run/internal/sandboxtest"
)

// GoSDKVersions are the versions of the official Go SDK
// (github.com/modelcontextprotocol/go-sdk) that testdata/gosdk builds its
// server with, each from its own VERSION.mod and VERSION.sum, as two
// versions of one module cannot share a go.mod. Neither is named go.mod:
// a go.mod in the tree would make testdata/gosdk a module of its own,
// which the module zip of sandbox-run leaves out (go install
// ...@VERSION then fails, TestGoInstallVersion). Their parsers differ:
// v1.2.0 matches member names as encoding/json does, regardless of case;
// v1.4.0 matches them exactly (segmentio/encoding) but drops trailing
// NULs from a key.
var GoSDKVersions = []string{"v1.2.0", "v1.4.0"}

// BuildGoSDKServer builds the server of testdata/gosdk at version into dir
// and returns its path. Its tools are echo {text} and write_file {path,
// content}. It builds a copy in a directory of the test's (main.go, and
// VERSION.mod and VERSION.sum as go.mod and go.sum), so that no build
// writes into the checkout. The build may fetch the SDK through the Go
// module proxy; when it cannot, the test is skipped, or fails under
// SANDBOX_REQUIRE=1.
func BuildGoSDKServer(t testing.TB, version, dir string) string {
	t.Helper()
	root, err := moduleRoot()
	if err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(dir, "mcptest-gosdk-"+version)
	src := filepath.Join(root, "internal", "mcptest", "testdata", "gosdk")
	work := t.TempDir()
	for from, to := range map[string]string{"main.go": "main.go", version + ".mod": "go.mod", version + ".sum": "go.sum"} {
		b, err := os.ReadFile(filepath.Join(src, from))
		if err != nil {
			t.Fatalf("the Go SDK %s test server: %v", version, err)
		}
		if err := os.WriteFile(filepath.Join(work, to), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	cmd := exec.Command("go", "build", "-o", out, ".")
	cmd.Dir = work
	cmd.Env = append(os.Environ(), "GOFLAGS=-mod=mod")
	if b, err := cmd.CombinedOutput(); err != nil {
		sandboxtest.Unavailable(t, "the Go SDK "+version+" test server", "go build in "+cmd.Dir+" (it needs the Go module proxy): "+err.Error()+"\n"+string(b))
		return ""
	}
	// The build must have used the version asked for, not another go.mod.
	if b, err := exec.Command("go", "version", "-m", out).Output(); err != nil ||
		!strings.Contains(string(b), "github.com/modelcontextprotocol/go-sdk\t"+version+"\t") {
		t.Fatalf("%s was not built with the Go SDK %s: %v\n%s", out, version, err, b)
	}
	return out
}
