package mcp

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sandbox-run/sandbox-run/internal/mcptest"
	"github.com/sandbox-run/sandbox-run/policy"
	"github.com/sandbox-run/sandbox-run/sandbox"
)

// TestSnapshot runs Snapshot in process (tier 0) against the mcptest
// servers: the mcp-go one, whose every list is one page, and the hostile
// one, whose tools come in two pages. Every section is present; what the
// rules hide is not pinned; a server that is not an MCP server fails.
func TestSnapshot(t *testing.T) {
	srv := filepath.Join(t.TempDir(), "mcptest-server")
	if out, err := exec.Command("go", "build", "-o", srv, "../internal/mcptest/server").CombinedOutput(); err != nil {
		t.Fatalf("building the mcptest server: %v\n%s", err, out)
	}
	p := policy.Policy{Sandbox: policy.ModeOff, Workdir: t.TempDir()}
	opts := Options{Rules: Rules{Deny: []string{"write_file"}}, Sandbox: sandbox.Options{LookupEnv: os.LookupEnv}}
	ctx := context.Background()
	pins, err := Snapshot(ctx, p, []string{srv}, opts)
	if err != nil {
		t.Fatal(err)
	}
	if len(pins.Sections) != 5 || len(pins.Sections[SectionTools]) != 7 || pins.Sections[SectionTools]["echo"] == nil ||
		pins.Sections[SectionTools]["write_file"] != nil || pins.Sections[SectionPrompts][mcptest.PromptName] == nil ||
		pins.Sections[SectionResources][mcptest.ResourceURI] == nil ||
		!strings.Contains(string(pins.Sections[SectionInitialize]["serverInfo"]), mcptest.ServerName) {
		t.Errorf("mcp-go server:\n%s", pins.Marshal())
	}
	pins, err = Snapshot(ctx, p, []string{srv, mcptest.HostileArg}, Options{Sandbox: sandbox.Options{LookupEnv: os.LookupEnv}})
	if err != nil {
		t.Fatal(err)
	}
	if len(pins.Sections[SectionTools]) != 7 || pins.Sections[SectionTools]["rugpull"] == nil ||
		pins.Sections[SectionResourceTemplates]["file:///priv/{name}"] == nil {
		t.Errorf("hostile server (two pages of tools):\n%s", pins.Marshal())
	}
	_, err = Snapshot(ctx, p, []string{"/bin/true"}, Options{Sandbox: sandbox.Options{LookupEnv: os.LookupEnv}})
	if err == nil || !strings.Contains(err.Error(), "initialize") {
		t.Errorf("a server that ends at once: %v", err)
	}
}
