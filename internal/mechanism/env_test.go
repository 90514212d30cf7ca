package mechanism

import (
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
