package sandbox

import (
	"bytes"
	"encoding/json"
	"flag"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path"
	"path/filepath"
	"reflect"
	"runtime"
	"sort"
	"strings"
	"testing"

	"github.com/sandbox-run/sandbox-run/report"
	"github.com/santhosh-tekuri/jsonschema/v6"
)

var updateSchema = flag.Bool("update-schema", false, "rewrite docs/report.schema.json from the Report type")

// schemaFile is the report's JSON Schema, checked into the tree for the
// harnesses that parse reports.
const schemaFile = "../docs/report.schema.json"

// TestReportSchema keeps docs/report.schema.json the schema of the Report
// type, field for field: a field added, renamed or made optional without
// the schema (go test ./sandbox -run TestReportSchema -update-schema)
// fails here, and so does a field without a doc comment, which is its
// description in the schema.
func TestReportSchema(t *testing.T) {
	g := newSchemaGen(t)
	root := g.object(reflect.TypeOf(report.Report{}))
	root["$schema"] = "https://json-schema.org/draft/2020-12/schema"
	root["$id"] = "https://sandbox-run.dev/schema/" + report.ReportSchema + ".json"
	root["title"] = "sandbox-run isolation report (" + report.ReportSchema + ")"
	props := root["properties"].(map[string]any)
	props["schema"].(map[string]any)["const"] = report.ReportSchema
	root["$defs"] = g.defs
	b, err := json.MarshalIndent(root, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	b = append(b, '\n')
	if *updateSchema {
		if err := os.WriteFile(schemaFile, b, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	validateGolden(t, b)
	old, err := os.ReadFile(schemaFile)
	if err != nil {
		t.Fatalf("%v (write it with -update-schema)", err)
	}
	if !bytes.Equal(old, b) {
		t.Errorf("%s is not the schema of the Report type: a field changed without it; rewrite it with go test ./sandbox -run TestReportSchema -update-schema and say what changed in docs/report.md", schemaFile)
	}
}

// schemaGen turns Go types into JSON Schema (draft 2020-12) the way
// encoding/json writes them: a struct is an object whose properties are
// its json names, required unless omitempty, with no other properties; a
// pointer may be null; a named struct type is a $defs entry.
type schemaGen struct {
	t    *testing.T
	top  string                       // the module's directory
	read map[string]bool              // the packages whose docs are read
	docs map[string]map[string]string // package.Type -> field -> doc
	defs map[string]any
}

func newSchemaGen(t *testing.T) *schemaGen {
	_, self, _, _ := runtime.Caller(0)
	return &schemaGen{t: t, top: filepath.Dir(filepath.Dir(self)), read: map[string]bool{},
		docs: map[string]map[string]string{}, defs: map[string]any{}}
}

// docOf returns the doc comment of t's field, reading t's package's files
// (every one, whatever its build tags: a doc comment is a doc comment on
// every platform) on first use.
func (g *schemaGen) docOf(t reflect.Type, field string) string {
	const mod = "github.com/sandbox-run/sandbox-run/"
	pkg := strings.TrimPrefix(t.PkgPath(), mod)
	if !g.read[pkg] {
		g.read[pkg] = true
		if pkg == t.PkgPath() {
			g.t.Fatalf("%s: the report holds a type from outside the module", t)
		}
		g.readDocs(filepath.Join(g.top, filepath.FromSlash(pkg)))
	}
	return g.docs[path.Base(pkg)+"."+t.Name()][field]
}

func (g *schemaGen) readDocs(dir string) {
	files, err := filepath.Glob(filepath.Join(dir, "*.go"))
	if err != nil {
		g.t.Fatal(err)
	}
	fset := token.NewFileSet()
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		af, err := parser.ParseFile(fset, f, nil, parser.ParseComments)
		if err != nil {
			g.t.Fatal(err)
		}
		ast.Inspect(af, func(n ast.Node) bool {
			ts, ok := n.(*ast.TypeSpec)
			if !ok {
				return true
			}
			st, ok := ts.Type.(*ast.StructType)
			if !ok {
				return false
			}
			m := map[string]string{}
			prev := ""
			for _, fld := range st.Fields.List {
				doc := strings.Join(strings.Fields(fld.Doc.Text()+" "+fld.Comment.Text()), " ")
				for _, name := range fld.Names {
					// A comment over a group ("Dirs and Entries
					// are ...") documents each field it names.
					if doc == "" && strings.Contains(prev, name.Name) {
						doc = prev
					}
					m[name.Name] = doc
				}
				prev = doc
			}
			g.docs[filepath.Base(dir)+"."+ts.Name.Name] = m
			return false
		})
	}
}

func (g *schemaGen) schema(t reflect.Type) map[string]any {
	switch t.Kind() {
	case reflect.Pointer:
		s := g.schema(t.Elem())
		return map[string]any{"anyOf": []any{s, map[string]any{"type": "null"}}}
	case reflect.Struct:
		if _, ok := g.defs[t.Name()]; !ok {
			g.defs[t.Name()] = nil // a cycle stops here
			g.defs[t.Name()] = g.object(t)
		}
		return map[string]any{"$ref": "#/$defs/" + t.Name()}
	case reflect.Slice:
		return map[string]any{"type": []any{"array", "null"}, "items": g.schema(t.Elem())}
	case reflect.Map:
		return map[string]any{"type": []any{"object", "null"}, "additionalProperties": g.schema(t.Elem())}
	case reflect.String:
		return map[string]any{"type": "string"}
	case reflect.Bool:
		return map[string]any{"type": "boolean"}
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return map[string]any{"type": "integer"}
	case reflect.Float32, reflect.Float64:
		return map[string]any{"type": "number"}
	}
	g.t.Fatalf("%s: no JSON Schema for kind %s", t, t.Kind())
	return nil
}

func (g *schemaGen) object(t reflect.Type) map[string]any {
	props := map[string]any{}
	var required []string
	for i := range t.NumField() {
		f := t.Field(i)
		if !f.IsExported() {
			continue
		}
		name, opts, _ := strings.Cut(f.Tag.Get("json"), ",")
		if name == "-" {
			continue
		}
		if name == "" {
			name = f.Name
		}
		s := g.schema(f.Type)
		doc := g.docOf(t, f.Name)
		if doc == "" {
			g.t.Errorf("%s.%s has no doc comment: say what it holds and when it is empty", t.Name(), f.Name)
		}
		s["description"] = doc
		props[name] = s
		if !strings.Contains(opts, "omitempty") {
			required = append(required, name)
		}
	}
	sort.Strings(required)
	obj := map[string]any{"type": "object", "properties": props, "additionalProperties": false}
	if len(required) > 0 {
		obj["required"] = required
	}
	return obj
}

// validateGolden checks the golden reports of report_golden_test.go
// against schema, so that a change to the report that its goldens show
// and the schema does not fails here, without a sandbox.
func validateGolden(t *testing.T, schema []byte) {
	t.Helper()
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(schema))
	if err != nil {
		t.Fatal(err)
	}
	c := jsonschema.NewCompiler()
	if err := c.AddResource("report.schema.json", doc); err != nil {
		t.Fatal(err)
	}
	sch, err := c.Compile("report.schema.json")
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"report-full.golden.json", "report-tier0.golden.json"} {
		b, err := os.ReadFile(filepath.Join("testdata", name))
		if err != nil {
			t.Fatal(err)
		}
		v, err := jsonschema.UnmarshalJSON(bytes.NewReader(b))
		if err != nil {
			t.Fatal(err)
		}
		if err := sch.Validate(v); err != nil {
			t.Errorf("testdata/%s does not validate against the report's schema: %v", name, err)
		}
	}
}
