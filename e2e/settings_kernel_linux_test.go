package e2e

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sandbox-run/sandbox-run/internal/sandboxtest"
)

// writeSettings writes a settings file outside the workdir.
func writeSettings(t *testing.T, name, js string) string {
	t.Helper()
	f := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(f, []byte(js), 0o644); err != nil {
		t.Fatal(err)
	}
	return f
}

// TestSettingsWeakeningRefused: each key that would weaken the sandbox,
// set to weaken it, is refused with exit 125 and one line naming it; the
// same file with the key set to its safe value runs the command (the
// control: the refusal is the key's doing).
func TestSettingsWeakeningRefused(t *testing.T) {
	needBwrap(t)
	w := sandboxtest.WorkDir(t)
	for _, tt := range []struct {
		key, bad, good string
	}{
		{"enableWeakerNestedSandbox", `{"enableWeakerNestedSandbox":true}`, `{"enableWeakerNestedSandbox":false}`},
		{"enableWeakerNetworkIsolation", `{"enableWeakerNetworkIsolation":true}`, `{"enableWeakerNetworkIsolation":false}`},
		{"allowAppleEvents", `{"allowAppleEvents":true}`, `{"allowAppleEvents":false}`},
		{"network.allowAllUnixSockets", `{"network":{"allowAllUnixSockets":true}}`, `{"network":{"allowAllUnixSockets":false}}`},
		{"filesystem.disabled", `{"filesystem":{"disabled":true}}`, `{"filesystem":{"disabled":false}}`},
		{"filesystem.allowGitConfig", `{"filesystem":{"allowGitConfig":true}}`, `{"filesystem":{"allowGitConfig":false}}`},
		{"sandbox.allowUnsandboxedCommands", `{"sandbox":{"allowUnsandboxedCommands":true}}`, `{"sandbox":{"allowUnsandboxedCommands":false}}`},
		{"sandbox.excludedCommands", `{"sandbox":{"excludedCommands":["docker"]}}`, `{"sandbox":{"excludedCommands":[]}}`},
		{"sandbox.enableWeakerNestedSandbox", `{"sandbox":{"enableWeakerNestedSandbox":true}}`, `{"sandbox":{"enableWeakerNestedSandbox":false}}`},
		{"network.allowUnixSockets[0]", `{"network":{"allowUnixSockets":["/var/run/docker.sock"]}}`, `{"network":{"allowUnixSockets":[]}}`},
	} {
		t.Run(tt.key, func(t *testing.T) {
			r := run(t, "", "run", "--workdir", w, "--settings", writeSettings(t, "bad.json", tt.bad), "--", "true")
			if r.code != 125 || strings.Count(r.stderr, "\n") != 1 || !strings.Contains(r.stderr, tt.key+":") {
				t.Errorf("exit %d, stderr %q; want 125 and one line naming %s", r.code, r.stderr, tt.key)
			}
			r = run(t, "", "run", "--workdir", w, "--settings", writeSettings(t, "good.json", tt.good), "--", "true")
			if r.code != 0 {
				t.Errorf("control (%s): exit %d, stderr %q; want 0", tt.good, r.code, r.stderr)
			}
		})
	}
}

// TestSettingsDenyWrite: srt's denyWrite holds a file of the workdir
// read-only; without the settings the same write succeeds.
func TestSettingsDenyWrite(t *testing.T) {
	needBwrap(t)
	w := sandboxtest.WorkDir(t)
	env := filepath.Join(w, ".env")
	if err := os.WriteFile(env, []byte("A=1\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	sandboxtest.Chown(t, env)
	f := writeSettings(t, "srt.json", `{"filesystem":{"denyRead":[],"allowWrite":["."],"denyWrite":[".env"]},"network":{"allowedDomains":[],"deniedDomains":[]}}`)
	r := sandboxed(t, w, "echo B=2 > .env", "--settings", f)
	if b, _ := os.ReadFile(env); r.code == 0 || string(b) != "A=1\n" {
		t.Errorf("with denyWrite: exit %d, .env %q, stderr %q; want the write refused", r.code, b, r.stderr)
	}
	r = sandboxed(t, w, "echo B=2 > .env")
	if b, _ := os.ReadFile(env); r.code != 0 || string(b) != "B=2\n" {
		t.Errorf("control: exit %d, .env %q, stderr %q; want the write done", r.code, b, r.stderr)
	}
}

// TestImportRoundTrip: `import` prints a profile that `run --config`
// takes, and that holds the file's hosts; a refused key exits 125.
func TestImportRoundTrip(t *testing.T) {
	needBwrap(t)
	w := sandboxtest.WorkDir(t)
	f := writeSettings(t, "srt.json", `{"network":{"allowedDomains":["github.com","*.npmjs.org"],"deniedDomains":["malicious.com"]},
"filesystem":{"denyRead":["~/.ssh"],"allowWrite":["."],"denyWrite":[".env"]}}`)
	r := run(t, "", "import", "srt", f, "--workdir", w)
	var prof map[string]any
	if r.code != 0 || json.Unmarshal([]byte(r.stdout), &prof) != nil {
		t.Fatalf("import: exit %d, stdout %q, stderr %q", r.code, r.stdout, r.stderr)
	}
	if hosts, _ := json.Marshal(prof["allow_hosts"]); string(hosts) != `["github.com","*.npmjs.org"]` || !strings.Contains(r.stderr, "filesystem.denyWrite[0]") {
		t.Errorf("profile %s; stderr %q", r.stdout, r.stderr)
	}
	pf := filepath.Join(t.TempDir(), "profile.json")
	if err := os.WriteFile(pf, []byte(r.stdout), 0o644); err != nil {
		t.Fatal(err)
	}
	if r := run(t, "", "run", "--config", pf, "--", "true"); r.code != 0 {
		t.Errorf("run --config (the import): exit %d, stderr %q", r.code, r.stderr)
	}
	bad := writeSettings(t, "bad.json", `{"sandbox":{"allowUnsandboxedCommands":true}}`)
	if r := run(t, "", "import", "claude", bad, "--workdir", w); r.code != 125 || r.stdout != "" || !strings.Contains(r.stderr, "sandbox.allowUnsandboxedCommands") {
		t.Errorf("import of a weakening key: exit %d, stdout %q, stderr %q", r.code, r.stdout, r.stderr)
	}
}

// TestPresetUnknown: an unknown preset exits 125 on one line listing the
// presets.
func TestPresetUnknown(t *testing.T) {
	w := sandboxtest.WorkDir(t)
	r := run(t, "", "run", "--workdir", w, "--preset", "nope", "--", "true")
	if r.code != 125 || strings.Count(r.stderr, "\n") != 1 || !strings.Contains(r.stderr, "anthropic, cargo, debian, github, go, npm, openai, pip") {
		t.Errorf("exit %d, stderr %q; want 125 and one line listing the presets", r.code, r.stderr)
	}
	r = run(t, "", "presets")
	for _, n := range []string{"npm", "pip", "go", "cargo", "github", "anthropic", "openai", "debian", "registry.npmjs.org", "GOPROXY="} {
		if r.code != 0 || !strings.Contains(r.stdout, n) {
			t.Errorf("presets: exit %d, stdout %q lacks %q", r.code, r.stdout, n)
		}
	}
	r = run(t, "", "schema")
	var s map[string]any
	if r.code != 0 || json.Unmarshal([]byte(r.stdout), &s) != nil || s["$schema"] != "https://json-schema.org/draft/2020-12/schema" {
		t.Errorf("schema: exit %d, stdout %.200q", r.code, r.stdout)
	}
}

// aptUpdate runs apt-get update for one small suite, its lists and
// cache in the private /tmp, as the sandbox's unprivileged uid.
const aptUpdate = `mkdir -p /tmp/l/partial /tmp/c/archives/partial &&
echo 'deb http://deb.debian.org/debian bookworm-updates main' > /tmp/s.list &&
apt-get -o Dir::State::Lists=/tmp/l -o Dir::Cache=/tmp/c -o Dir::Etc::sourcelist=/tmp/s.list -o Dir::Etc::sourceparts=/nonexistent \
 -o Debug::NoLocking=1 -o APT::Sandbox::User=nobody update`

// TestPresetRealTools runs the real npm, go and apt through the egress proxy
// with their preset; the control, with egress to another host only, fails.
// Those registries are reachable from this machine; PyPI and crates.io
// are not, so the other presets are checked only as host lists (policy's
// TestPresetsTable).
func TestPresetRealTools(t *testing.T) {
	needBwrap(t)
	for _, tt := range []struct {
		preset, tool string
		cmd          []string
		want         string
	}{
		{"npm", "npm", []string{"npm", "view", "is-number@7.0.0", "version"}, "7.0.0"},
		// apt with its state in the private /tmp, one small suite.
		{"debian", "apt-get", []string{"sh", "-c", aptUpdate}, "Get:1 http://deb.debian.org/debian bookworm-updates InRelease"},
		{"go", "/usr/local/go/bin/go", []string{"/usr/local/go/bin/go", "mod", "download", "-json", "rsc.io/quote@v1.5.2"}, `"Sum": "h1:w5fcysjrx7yqtD/aO+QwRjYZOKnaM9Uh2b40tElTs3Y="`},
	} {
		t.Run(tt.preset, func(t *testing.T) {
			if _, err := exec.LookPath(tt.tool); err != nil {
				sandboxtest.Unavailable(t, tt.tool, "install it (npm: apt-get install -y npm; go: /usr/local/go; apt: Debian)")
			}
			w := sandboxtest.WorkDir(t)
			env := []string{"--env", "GOTOOLCHAIN=local", "--env", "GOMODCACHE=/tmp/m", "--env", "GOCACHE=/tmp/c"}
			args := append(append([]string{"run", "--workdir", w, "--preset", tt.preset}, env...), append([]string{"--"}, tt.cmd...)...)
			r := run(t, "", args...)
			if r.code != 0 || !strings.Contains(r.stdout, tt.want) {
				t.Fatalf("with --preset %s: exit %d, stdout %q, stderr %q", tt.preset, r.code, r.stdout, r.stderr)
			}
			// Control: egress on, but to another host only.
			args = append(append([]string{"run", "--workdir", w, "--allow-host", "example.com"}, env...), append([]string{"--"}, tt.cmd...)...)
			if r := run(t, "", args...); r.code == 0 || strings.Contains(r.stdout, tt.want) {
				t.Errorf("control without the preset: exit %d, stdout %q; want a failure", r.code, r.stdout)
			}
		})
	}
}
