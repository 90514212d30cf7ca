package mcp

import (
	"strings"
	"testing"
)

func TestMatch(t *testing.T) {
	for _, tc := range []struct {
		pattern, name string
		want          bool
	}{
		{"read_file", "read_file", true},
		{"read_file", "read_files", false},
		{"read_file", "Read_file", false},
		{"read_*", "read_file", true},
		{"read_*", "read_", true},
		{"read_*", "write_file", false},
		{"*", "", true},
		{"*", "anything/at.all", true},
		{"*file", "read_file", true},
		{"*_*_*", "a_b_c", true},
		{"*_*_*", "a_b", false},
		{"?", "é", true}, // one character, two bytes
		{"??", "é", false},
		{"r?ad", "read", true},
		{"r?ad", "rad", false},
		{"a*b*c", "aXbYbZc", true},
		{"a*b*c", "aXbYbZ", false},
		{"[a]", "a", false}, // no classes: '[' is literal
		{"[a]", "[a]", true},
		{"", "", true},
		{"", "x", false},
	} {
		if got := Match(tc.pattern, tc.name); got != tc.want {
			t.Errorf("Match(%q, %q) = %v, want %v", tc.pattern, tc.name, got, tc.want)
		}
	}
}

func TestMatchLinear(t *testing.T) {
	// A pattern that makes naive backtracking exponential.
	p := strings.Repeat("a*", 30) + "b"
	n := strings.Repeat("a", 5000)
	if Match(p, n) {
		t.Fatal("matched")
	}
}

func TestRulesCheck(t *testing.T) {
	for _, tc := range []struct {
		name     string
		r        Rules
		tool     string
		want     bool
		wantRule string
	}{
		{"zero shows all", Rules{}, "anything", true, ""},
		{"allowed", Rules{Allow: []string{"read_*"}}, "read_file", true, ""},
		{"not allowed", Rules{Allow: []string{"read_*", "list_*"}}, "write_file", false, `no --allow-tool pattern ("read_*", "list_*")`},
		{"denied", Rules{Deny: []string{"write_*"}}, "write_file", false, `--deny-tool "write_*"`},
		{"deny wins", Rules{Allow: []string{"*"}, Deny: []string{"write_file"}}, "write_file", false, `--deny-tool "write_file"`},
		{"deny other", Rules{Allow: []string{"*"}, Deny: []string{"write_file"}}, "read_file", true, ""},
		{"empty name", Rules{Allow: []string{"read_*"}}, "", false, `no --allow-tool pattern ("read_*")`},
	} {
		ok, rule := tc.r.Check(tc.tool)
		if ok != tc.want || rule != tc.wantRule {
			t.Errorf("%s: Check(%q) = %v %q, want %v %q", tc.name, tc.tool, ok, rule, tc.want, tc.wantRule)
		}
	}
}

func TestRulesValidate(t *testing.T) {
	for _, tc := range []struct {
		r    Rules
		want string
	}{
		{Rules{Allow: []string{""}}, "--allow-tool: empty"},
		{Rules{Deny: []string{"a\x00"}}, "control character"},
		{Rules{Deny: []string{"a\nb"}}, "control character"},
		{Rules{Deny: []string{"["}}, `--deny-tool "[": "["`},
		{Rules{Deny: []string{"write_[a-z]*"}}, `"[" is not glob syntax`},
		{Rules{Allow: []string{"read_{a,b}"}}, `--allow-tool "read_{a,b}": "{"`},
		{Rules{Deny: []string{`a\*`}}, `"\\"`},
		{Rules{DenyPrompts: []string{"]"}}, "--deny-prompt"},
		{Rules{AllowPrompts: []string{""}}, "--allow-prompt"},
		{Rules{DenyResources: []string{"file:///[x]"}}, "--deny-resource"},
		{Rules{AllowResources: []string{"\xff"}}, "UTF-8"},
	} {
		err := tc.r.Validate()
		if err == nil || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), "fix:") {
			t.Errorf("%+v: %v, want an error holding %q and a fix", tc.r, err, tc.want)
		}
	}
	if err := (Rules{Allow: []string{"*"}, Deny: []string{"x?"}, AllowResources: []string{"file:///*"}, DenyPrompts: []string{"a.b-c"}}).Validate(); err != nil {
		t.Error(err)
	}
}

func TestRulesKinds(t *testing.T) {
	for _, tc := range []struct {
		r          Rules
		kind, name string
		want       bool
		rule       string
	}{
		{Rules{}, KindPrompt, "p", true, ""},
		{Rules{}, KindResource, "file:///x", true, ""},
		{Rules{DenyPrompts: []string{"p*"}}, KindPrompt, "pp", false, `--deny-prompt "p*"`},
		{Rules{DenyPrompts: []string{"p*"}}, KindTool, "pp", true, ""},
		{Rules{AllowResources: []string{"file:///pub/*"}}, KindResource, "file:///pub/a", true, ""},
		{Rules{AllowResources: []string{"file:///pub/*"}}, KindResource, "file:///priv/a", false, `no --allow-resource pattern ("file:///pub/*")`},
		// Allow-list mode closes the kinds it does not name.
		{Rules{AllowResources: []string{"file:///pub/*"}}, KindTool, "read", false, "allow-list mode: no --allow-tool pattern"},
		{Rules{Allow: []string{"*"}}, KindPrompt, "p", false, "allow-list mode: no --allow-prompt pattern"},
		{Rules{Allow: []string{"*"}, AllowPrompts: []string{"*"}}, KindPrompt, "p", true, ""},
		{Rules{Allow: []string{"*"}}, "other", "p", false, "unknown kind other"},
	} {
		ok, rule := tc.r.CheckKind(tc.kind, tc.name)
		if ok != tc.want || rule != tc.rule {
			t.Errorf("%+v CheckKind(%s, %q) = %v %q, want %v %q", tc.r, tc.kind, tc.name, ok, rule, tc.want, tc.rule)
		}
	}
}
