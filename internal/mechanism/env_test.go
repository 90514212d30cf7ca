package mechanism

import (
	"slices"
	"strings"
	"testing"

	"github.com/sandbox-run/sandbox-run/policy"
)

func TestCommandEnv(t *testing.T) {
	p := policy.Policy{Workdir: "/w", Env: map[string]string{"HTTP_PROXY": "mine"}}
	env, err := CommandEnv(p, map[string]string{"HTTP_PROXY": "http://127.0.0.1:3128", "HTTPS_PROXY": "http://127.0.0.1:3128"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	got := strings.Join(env, " ")
	if !strings.Contains(got, "HTTP_PROXY=mine") || !strings.Contains(got, "HTTPS_PROXY=http://127.0.0.1:3128") {
		t.Errorf("commandEnv = %s", got)
	}
}

func TestEnvNames(t *testing.T) {
	for _, tt := range []struct {
		env  []string
		want []string
	}{
		{nil, []string{}},
		{[]string{"B=2", "A=1=x", "C="}, []string{"A", "B", "C"}},
		{[]string{"NOEQUALS", "A=secret"}, []string{"A", "NOEQUALS"}},
	} {
		if got := EnvNames(tt.env); !slices.Equal(got, tt.want) || strings.Contains(strings.Join(got, ""), "secret") {
			t.Errorf("EnvNames(%q) = %q, want %q", tt.env, got, tt.want)
		}
	}
}
