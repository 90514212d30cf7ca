package hostnet

import (
	"errors"
	"maps"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sandbox-run/sandbox-run/internal/fault"
	"github.com/sandbox-run/sandbox-run/internal/gitrepo"
	"github.com/sandbox-run/sandbox-run/policy"
)

// TestLoadSecretsErrors: every way reading a secret fails is a setup
// error that names the secret and never holds its value; and a file inside
// a writable directory is refused (the command could swap it). Control:
// the same file outside is read, and the value is not in the env the
// command gets, only its placeholder.
func TestLoadSecretsErrors(t *testing.T) {
	const val = "ghp_LOADreal0123456789abcdefghijklmnopqr"
	w := t.TempDir()
	outside := filepath.Join(t.TempDir(), "gh")
	inside := filepath.Join(w, "gh")
	for _, f := range []string{outside, inside} {
		if err := os.WriteFile(f, []byte(val+"\n"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	short := filepath.Join(t.TempDir(), "short")
	os.WriteFile(short, []byte("ghp_x1"), 0o600)
	lookup := func(k string) (string, bool) {
		switch k {
		case "GH":
			return val, true
		case "SHORT":
			return "ghp_" + val[len(val)-5:], true
		}
		return "", false
	}
	p := func(from string) policy.Policy {
		return policy.Policy{Workdir: w, AllowHosts: []string{"api.github.com"},
			Secrets: []policy.Secret{{Name: "GH", From: from, Hosts: []string{"api.github.com"}}}}
	}
	for _, tc := range []struct {
		name, from, want string
	}{
		{"unset variable", "env:NOPE", "NOPE is not set"},
		{"too short", "env:SHORT", "fewer than"},
		{"short file", "file:" + short, "fewer than"},
		{"file in the workdir", "file:" + inside, "writable"},
		{"missing file", "file:" + outside + ".none", "secret GH"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := loadSecrets(p(tc.from), lookup, map[string]string{})
			var se *fault.Error
			if !errors.As(err, &se) || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), "GH") {
				t.Fatalf("loadSecrets: %v; want a SetupError naming GH and %q", err, tc.want)
			}
			if strings.Contains(err.Error(), val) || strings.Contains(err.Error(), val[4:20]) {
				t.Fatalf("the error holds the value: %v", err)
			}
		})
	}
	for _, from := range []string{"", "file:" + outside} {
		env := map[string]string{}
		set, err := loadSecrets(p(from), lookup, env)
		if err != nil {
			t.Fatalf("from %q: %v", from, err)
		}
		ph, _ := set.Placeholder("GH")
		if env["GH"] != ph || env["GIT_CONFIG_COUNT"] != "1" || !strings.Contains(env["GIT_CONFIG_KEY_0"], "credential.https://api.github.com.helper") {
			t.Fatalf("from %q: env %v", from, env)
		}
		for k, v := range env {
			if strings.Contains(v, val) {
				t.Fatalf("from %q: the real value is in $%s", from, k)
			}
		}
	}
}

// TestAppendGitConfig: the secrets' credential helpers go after the git
// config the environment carries already (the caller's identity), never
// over it. The control is the overwrite this replaced: identity lost.
func TestAppendGitConfig(t *testing.T) {
	env := map[string]string{"GIT_CONFIG_COUNT": "2",
		"GIT_CONFIG_KEY_0": "user.name", "GIT_CONFIG_VALUE_0": "A",
		"GIT_CONFIG_KEY_1": "user.email", "GIT_CONFIG_VALUE_1": "a@example.com"}
	gitrepo.AppendEnvConfig(env, []string{"credential.https://h.example.helper"}, []string{"!f"})
	want := map[string]string{"GIT_CONFIG_COUNT": "3",
		"GIT_CONFIG_KEY_0": "user.name", "GIT_CONFIG_VALUE_0": "A",
		"GIT_CONFIG_KEY_1": "user.email", "GIT_CONFIG_VALUE_1": "a@example.com",
		"GIT_CONFIG_KEY_2": "credential.https://h.example.helper", "GIT_CONFIG_VALUE_2": "!f"}
	if !maps.Equal(env, want) {
		t.Errorf("got %v, want %v", env, want)
	}
	empty := map[string]string{}
	gitrepo.AppendEnvConfig(empty, []string{"k"}, []string{"v"})
	if empty["GIT_CONFIG_COUNT"] != "1" || empty["GIT_CONFIG_KEY_0"] != "k" {
		t.Errorf("from nothing: %v", empty)
	}
}
