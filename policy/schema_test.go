package policy

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"sort"
	"strings"
	"testing"

	"github.com/santhosh-tekuri/jsonschema/v6"
)

func compileSchema(t *testing.T) *jsonschema.Schema {
	t.Helper()
	b, err := Schema()
	if err != nil {
		t.Fatal(err)
	}
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	c := jsonschema.NewCompiler()
	if err := c.AddResource(SchemaID, doc); err != nil {
		t.Fatal(err)
	}
	s, err := c.Compile(SchemaID)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// TestSchemaFields: the schema's properties are exactly Policy's JSON
// fields, and a described field without a Policy field (or the reverse)
// makes Schema fail.
func TestSchemaFields(t *testing.T) {
	b, err := Schema()
	if err != nil {
		t.Fatal(err)
	}
	var s struct {
		Schema     string                    `json:"$schema"`
		Properties map[string]map[string]any `json:"properties"`
	}
	if err := json.Unmarshal(b, &s); err != nil {
		t.Fatal(err)
	}
	if s.Schema != "https://json-schema.org/draft/2020-12/schema" {
		t.Errorf("$schema %q", s.Schema)
	}
	var fields, props []string
	for _, f := range jsonFields(reflect.TypeFor[Policy]()) {
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		fields = append(fields, name)
	}
	for k := range s.Properties {
		props = append(props, k)
	}
	sort.Strings(fields)
	sort.Strings(props)
	if !reflect.DeepEqual(fields, props) {
		t.Errorf("schema properties %v, Policy fields %v", props, fields)
	}
	// Control: a field without its description is refused.
	fieldDocs["extra_field_for_test"] = "x"
	_, err = Schema()
	delete(fieldDocs, "extra_field_for_test")
	if err == nil {
		t.Error("Schema accepted a description with no Policy field")
	}
}

// TestSchemaAgreesWithParse: what Parse accepts the schema accepts, and
// what the schema refuses Parse refuses, on a few hand-made profiles.
func TestSchemaAgreesWithParse(t *testing.T) {
	s := compileSchema(t)
	for _, tt := range []struct {
		js string
		ok bool
	}{
		{`{"workdir":"/p","allow_hosts":["github.com"],"presets":["npm"],"memory":"512M","timeout":"90s","env":{"A":"b"}}`, true},
		{`{"memory":"none","tmp_size":1048576,"sandbox":"bwrap","caches":["go"]}`, true},
		{`{"workdir":"/p","allow_host":["x"]}`, false},
		{`{"presets":["nope"]}`, false},
		{`{"sandbox":"docker"}`, false},
		{`{"ptrace":"yes"}`, false},
	} {
		doc, err := jsonschema.UnmarshalJSON(strings.NewReader(tt.js))
		if err != nil {
			t.Fatal(err)
		}
		verr := s.Validate(doc)
		p, perr := Parse(strings.NewReader(tt.js))
		if perr == nil {
			if perr = p.validatePresets(); perr == nil {
				perr = p.validateMode()
			}
		}
		if (verr == nil) != tt.ok || (perr == nil) != tt.ok {
			t.Errorf("%s: schema %v, Parse %v, want ok=%v", tt.js, verr, perr, tt.ok)
		}
	}
}

// profileBlock is a fenced code block marked as a profile: "```json profile".
var profileBlock = regexp.MustCompile("(?s)```json profile\n(.*?)```")

// TestDocProfilesValidate validates every example profile in README.md
// and docs/*.md (code blocks opened with "```json profile") against the
// schema, and reads each with Parse.
func TestDocProfilesValidate(t *testing.T) {
	s := compileSchema(t)
	files, _ := filepath.Glob("../docs/*.md")
	files = append(files, "../README.md")
	n := 0
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range profileBlock.FindAllSubmatch(b, -1) {
			n++
			doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(m[1]))
			if err != nil {
				t.Errorf("%s: %v\n%s", f, err, m[1])
				continue
			}
			if err := s.Validate(doc); err != nil {
				t.Errorf("%s: schema: %v\n%s", f, err, m[1])
			}
			if _, err := Parse(bytes.NewReader(m[1])); err != nil {
				t.Errorf("%s: Parse: %v\n%s", f, err, m[1])
			}
		}
	}
	if n < 3 {
		t.Errorf("found %d profile blocks in the docs, want at least 3 (README.md, docs/mcp.md, docs/settings.md)", n)
	}
}
