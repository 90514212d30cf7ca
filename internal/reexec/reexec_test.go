package reexec

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

func TestMainDispatchesOnlyItsModes(t *testing.T) {
	for _, args := range [][]string{nil, {}, {"run", "--", "true"}, {"__no-such-mode"}, {"--", "__probe"}} {
		if code, ok := Main(args); ok {
			t.Errorf("Main(%q) ran a mode (exit %d)", args, code)
		}
	}
	// A mode that is in the table runs: the probe's usage error (2) is
	// its own answer, not the table's.
	if code, ok := Main([]string{"__probe"}); !ok || code != 2 {
		t.Errorf("Main(__probe) = %d, %v; want the probe's usage status 2", code, ok)
	}
}

// modeName is how a hidden mode's name is spelled.
var modeName = regexp.MustCompile(`^__[a-z][a-z0-9-]*$`)

// TestOneRegistry: every hidden mode name spelled in the Go code that
// cmd/sandbox-run links is in the table, so no mode can be served (or
// started) that main does not dispatch; and every name in the table has
// the hidden spelling.
func TestOneRegistry(t *testing.T) {
	m := modes()
	if len(m) < 4 {
		t.Fatalf("the table has %d modes, want init, exec, landlock and probe", len(m))
	}
	for name := range m {
		if !modeName.MatchString(name) {
			t.Errorf("mode %q is not spelled __name", name)
		}
	}
	tmpl := `{{if and .Module (eq .Module.Path "github.com/sandbox-run/sandbox-run")}}{{$d := .Dir}}{{range .GoFiles}}{{$d}}/{{.}}{{"\n"}}{{end}}{{end}}`
	out, err := exec.Command("go", "list", "-deps", "-f", tmpl, "github.com/sandbox-run/sandbox-run/cmd/sandbox-run").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	files := strings.Fields(string(out))
	if len(files) < 50 {
		t.Fatalf("go list named %d files of the module, too few to trust", len(files))
	}
	seen := map[string]bool{}
	fset := token.NewFileSet()
	for _, f := range files {
		file, err := parser.ParseFile(fset, f, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		ast.Inspect(file, func(n ast.Node) bool {
			lit, ok := n.(*ast.BasicLit)
			if !ok || lit.Kind != token.STRING {
				return true
			}
			s, err := strconv.Unquote(lit.Value)
			if err == nil && modeName.MatchString(s) {
				seen[s] = true
				if _, ok := m[s]; !ok {
					t.Errorf("%s: %q looks like a hidden mode but is not in the table", fset.Position(lit.Pos()), s)
				}
			}
			return true
		})
	}
	for name := range m {
		if !seen[name] {
			t.Errorf("mode %q: its name is spelled nowhere in the linked code (the scan is blind)", name)
		}
	}
}
