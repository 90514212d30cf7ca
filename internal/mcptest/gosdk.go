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
// server with: go.mod names the first, VERSION.mod (go build -modfile)
// each other one, as two versions of one module cannot share a go.mod.
// Their parsers differ: v1.2.0 matches member
// names as encoding/json does, regardless of case; v1.4.0 matches them
// exactly (segmentio/encoding) but drops trailing NULs from a key.
var GoSDKVersions = []string{"v1.2.0", "v1.4.0"}

// BuildGoSDKServer builds the server of testdata/gosdk at version into dir
// and returns its path. Its tools are echo {text} and write_file {path,
// content}. The build may fetch the SDK through the Go module proxy; when
// it cannot, the test is skipped, or fails under SANDBOX_REQUIRE=1.
func BuildGoSDKServer(t testing.TB, version, dir string) string {
	t.Helper()
	root, err := moduleRoot()
	if err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(dir, "mcptest-gosdk-"+version)
	src := filepath.Join(root, "internal", "mcptest", "testdata", "gosdk")
	args := []string{"build", "-o", out}
	if _, err := os.Stat(filepath.Join(src, version+".mod")); err == nil {
		args = append(args, "-modfile", version+".mod")
	}
	cmd := exec.Command("go", append(args, ".")...)
	cmd.Dir = src
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
