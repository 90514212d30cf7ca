package sandbox

import (
	"slices"
	"testing"

	"github.com/sandbox-run/sandbox-run/internal/mechanism"
	"github.com/sandbox-run/sandbox-run/policy"
)

// TestCommandEnvGitConfig: the run's git config (a secret's credential
// helper) and the policy's (the caller's identity) both reach the
// command, the policy's first. The control is the merge this replaced,
// in which the policy's entries overwrote the run's.
func TestCommandEnvGitConfig(t *testing.T) {
	p := policy.Policy{Workdir: "/w", Env: map[string]string{"GIT_CONFIG_COUNT": "1", "GIT_CONFIG_KEY_0": "user.name", "GIT_CONFIG_VALUE_0": "A"}}
	net := map[string]string{"GIT_CONFIG_COUNT": "1", "GIT_CONFIG_KEY_0": "credential.https://h.helper", "GIT_CONFIG_VALUE_0": "!f"}
	env, err := mechanism.CommandEnv(p, net, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"GIT_CONFIG_COUNT=2", "GIT_CONFIG_KEY_0=user.name", "GIT_CONFIG_VALUE_0=A",
		"GIT_CONFIG_KEY_1=credential.https://h.helper", "GIT_CONFIG_VALUE_1=!f"} {
		if !slices.Contains(env, want) {
			t.Errorf("env lacks %s: %v", want, env)
		}
	}
}
