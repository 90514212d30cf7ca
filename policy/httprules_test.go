package policy

import (
	"errors"
	"testing"
)

func TestValidateHTTP(t *testing.T) {
	rule := []string{"GET,HEAD api.github.com/repos/**"}
	tests := []struct {
		name  string
		p     Policy
		field string // "" = valid
	}{
		{"rule", Policy{Workdir: "/w", AllowHTTP: rule}, ""},
		{"rule with upstream CA under bwrap", Policy{Workdir: "/w", AllowHTTP: rule, UpstreamCA: "/etc/ca.pem", Sandbox: ModeBwrap}, ""},
		{"rule under gvisor", Policy{Workdir: "/w", AllowHTTP: rule, Sandbox: ModeGvisor}, ""},
		{"bad rule", Policy{Workdir: "/w", AllowHTTP: []string{"GET *.github.com/"}}, "allow-http"},
		{"NUL in rule", Policy{Workdir: "/w", AllowHTTP: []string{"GET a.example/\x00"}}, "allow-http"},
		{"relative upstream CA", Policy{Workdir: "/w", AllowHTTP: rule, UpstreamCA: "ca.pem"}, "upstream-ca"},
		{"upstream CA without rules", Policy{Workdir: "/w", UpstreamCA: "/etc/ca.pem"}, "upstream-ca"},
		{"upstream CA without rules, with a secret", Policy{Workdir: "/w", UpstreamCA: "/etc/ca.pem", AllowHosts: []string{"api.example"},
			Secrets: []Secret{{Name: "TOK", Hosts: []string{"api.example"}}}}, ""},
		{"upstream CA without rules, the LLM key to its provider", Policy{Workdir: "/w", UpstreamCA: "/etc/ca.pem", AllowHosts: []string{"api.anthropic.com"},
			LLMKeyEnv: "ANTHROPIC_API_KEY"}, ""},
		{"upstream CA without rules, the LLM key over its socket", Policy{Workdir: "/w", UpstreamCA: "/etc/ca.pem", LLMKeyEnv: "ANTHROPIC_API_KEY",
			LLMSocket: "/run/llm.sock"}, "upstream-ca"},
		{"with a node proxy", Policy{Workdir: "/w", AllowHTTP: rule, EgressSocket: "/run/e.sock"}, "allow-http"},
		{"landlock", Policy{Workdir: "/w", AllowHTTP: rule, Sandbox: ModeLandlock}, "allow-http"},
		{"seatbelt", Policy{Workdir: "/w", AllowHTTP: rule, Sandbox: ModeSeatbelt}, "allow-http"},
		{"tier 0", Policy{Workdir: "/w", AllowHTTP: rule, Sandbox: ModeOff}, "allow-http"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.p.Validate()
			if tt.field == "" {
				if err != nil {
					t.Fatalf("Validate() = %v, want nil", err)
				}
				return
			}
			var ie *InvalidError
			if !errors.As(err, &ie) || ie.Field != tt.field || ie.Fix == "" {
				t.Fatalf("Validate() = %v, want an *InvalidError for %s with a fix", err, tt.field)
			}
		})
	}
}
