package wrap

import (
	"os"
	"path/filepath"
	"testing"
)

// FuzzRewrite: any bytes, under any client's file name, either are
// refused or give a plan whose output passed the decode-and-compare
// check and whose second rewrite changes nothing; never a panic.
func FuzzRewrite(f *testing.F) {
	for _, c := range clients {
		b, err := os.ReadFile(filepath.Join("testdata", c.file))
		if err != nil {
			f.Fatal(err)
		}
		f.Add(c.file, b)
	}
	f.Add(".mcp.json", []byte(`{"mcpServers":{"a":{"command":"x","args":[]}}}`))
	f.Fuzz(func(t *testing.T, name string, b []byte) {
		path := filepath.Join("/p", filepath.Base(filepath.Dir(name)), filepath.Base(name))
		p, err := Rewrite(path, b, Options{SandboxRun: sbx})
		if err != nil {
			return
		}
		again, err := Rewrite(path, p.New, Options{SandboxRun: sbx, Format: p.Format})
		if err != nil {
			t.Fatalf("the rewritten file is refused: %v\n%s", err, p.New)
		}
		if again.Changed() {
			t.Fatalf("a second rewrite changed\n%s\n%s", p.New, again.Diff("x"))
		}
	})
}
