package policy

import (
	"errors"
	"reflect"
	"strings"
	"testing"
)

func TestParseSecretFlag(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want Secret
		err  bool
	}{
		{"GH@api.github.com", Secret{Name: "GH", Hosts: []string{"api.github.com"}}, false},
		{"GH@a.example,b.example:8443", Secret{Name: "GH", Hosts: []string{"a.example", "b.example:8443"}}, false},
		{"GH=file:/run/x@y@a.example", Secret{Name: "GH", From: "file:/run/x@y", Hosts: []string{"a.example"}}, false},
		{"GH=env:TOKEN@a.example", Secret{Name: "GH", From: "env:TOKEN", Hosts: []string{"a.example"}}, false},
		{"GH", Secret{}, true},
	} {
		got, err := ParseSecretFlag(tc.in)
		if (err != nil) != tc.err || (!tc.err && !reflect.DeepEqual(got, tc.want)) {
			t.Errorf("ParseSecretFlag(%q) = %+v, %v; want %+v", tc.in, got, err, tc.want)
		}
	}
}

func TestValidateSecrets(t *testing.T) {
	base := func(f func(p *Policy)) Policy {
		p := Policy{Workdir: "/w", AllowHosts: []string{"api.github.com"},
			Secrets: []Secret{{Name: "GH", Hosts: []string{"api.github.com"}}}}
		f(&p)
		return p
	}
	for _, tc := range []struct {
		name string
		p    Policy
		want string // "" accepted, else a word of the refusal
	}{
		{"plain", base(func(*Policy) {}), ""},
		{"file", base(func(p *Policy) { p.Secrets[0].From = "file:/run/gh" }), ""},
		{"relative file", base(func(p *Policy) { p.Secrets[0].From = "file:gh" }), "absolute"},
		{"a value, not a source", base(func(p *Policy) { p.Secrets[0].From = "ghp_0123456789abcdef" }), "never the value"},
		{"no host", base(func(p *Policy) { p.Secrets[0].Hosts = nil }), "no host"},
		{"bad host", base(func(p *Policy) { p.Secrets[0].Hosts = []string{"http://x"} }), "host name"},
		{"wildcard", base(func(p *Policy) { p.Secrets[0].Hosts = []string{"*.github.com"} }), "wildcard"},
		{"port", base(func(p *Policy) { p.Secrets[0].Hosts = []string{"api.github.com:8443"} }), ""},
		{"bad name", base(func(p *Policy) { p.Secrets[0].Name = "1GH" }), "variable name"},
		{"reserved", base(func(p *Policy) { p.Secrets[0].Name = "PATH" }), "sets itself"},
		{"also in env", base(func(p *Policy) { p.Env = map[string]string{"GH": "x"} }), "--env"},
		{"also passed", base(func(p *Policy) { p.PassEnv = []string{"GH"} }), "--pass-env"},
		{"twice", base(func(p *Policy) { p.Secrets = append(p.Secrets, p.Secrets[0]) }), "twice"},
		{"tier 0", base(func(p *Policy) { p.Sandbox = ModeOff }), "tier 0"},
		{"node proxy", base(func(p *Policy) { p.EgressSocket = "/e.sock" }), "node-wide"},
		{"no egress", base(func(p *Policy) { p.AllowHosts = nil }), "egress"},
		{"llm key known provider", Policy{Workdir: "/w", AllowHosts: []string{"api.anthropic.com"}, LLMKeyEnv: "ANTHROPIC_API_KEY"}, ""},
		{"llm key on a socket", Policy{Workdir: "/w", LLMSocket: "/l.sock", LLMKeyEnv: "MY_KEY"}, ""},
		{"llm key unknown, no socket", Policy{Workdir: "/w", AllowHosts: []string{"x.example"}, LLMKeyEnv: "MY_KEY"}, "--llm-socket"},
		{"llm key passed in", Policy{Workdir: "/w", LLMSocket: "/l.sock", LLMKeyEnv: "MY_KEY", PassEnv: []string{"MY_KEY"}}, "--pass-env"},
		{"llm key also a secret", base(func(p *Policy) { p.LLMSocket = "/l.sock"; p.LLMKeyEnv = "GH" }), "twice"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.p.Validate()
			if tc.want == "" {
				if err != nil {
					t.Fatalf("refused: %v", err)
				}
				return
			}
			if !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), "fix:") {
				t.Fatalf("Validate = %v; want a refusal naming %q", err, tc.want)
			}
			if strings.Contains(err.Error(), "ghp_0123456789abcdef") {
				t.Fatalf("the refusal repeats a value: %v", err)
			}
		})
	}
}

// TestSecretProfile: a profile names where a secret's value is read, and
// a value field is refused as an unknown field.
func TestSecretProfile(t *testing.T) {
	p, err := Parse(strings.NewReader(`{"workdir":"/w","allow_hosts":["a.example"],"secrets":[{"name":"GH","hosts":["a.example"],"from":"file:/run/gh","in_body":true}]}`))
	if err != nil || len(p.Secrets) != 1 || p.Secrets[0].From != "file:/run/gh" || !p.Secrets[0].InBody || p.Validate() != nil {
		t.Fatalf("Parse: %+v, %v", p, err)
	}
	if _, err := Parse(strings.NewReader(`{"workdir":"/w","secrets":[{"name":"GH","hosts":["a.example"],"value":"ghp_x"}]}`)); err == nil {
		t.Fatal("a profile with a secret's value accepted")
	}
}
