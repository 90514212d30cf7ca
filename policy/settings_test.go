package policy

import (
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

var testBase = SettingsBase{Workdir: "/work/proj", Home: "/home/me", Root: "/work/proj"}

func parseTestSettings(t *testing.T, f SettingsFormat, js string) (Settings, error) {
	t.Helper()
	return ParseSettings(f, []byte(js), testBase, Policy{Workdir: testBase.Workdir})
}

// outcome returns the outcome recorded for key.
func outcome(s Settings, key string) (KeyOutcome, bool) {
	for _, k := range s.Keys {
		if k.Key == key {
			return k, true
		}
	}
	return KeyOutcome{}, false
}

// TestSettingsKeys takes each key of both formats once, as its tool's
// documentation spells it, and checks what became of it.
func TestSettingsKeys(t *testing.T) {
	type want struct {
		key     string
		status  Status
		weakens bool
		missing string
		check   func(Policy) bool
	}
	hosts := func(h ...string) func(Policy) bool {
		return func(p Policy) bool { return reflect.DeepEqual(p.AllowHosts, h) }
	}
	for _, tt := range []struct {
		name   string
		format SettingsFormat
		js     string
		want   want
	}{
		{"srt allowedDomains", FormatSrt, `{"network":{"allowedDomains":["github.com","*.npmjs.org","api.example.com:443"]}}`,
			want{key: "network.allowedDomains[2]", status: StatusApplied, check: hosts("github.com", "*.npmjs.org", "api.example.com:443")}},
		{"srt allowedDomains localhost", FormatSrt, `{"network":{"allowedDomains":["localhost"]}}`,
			want{key: "network.allowedDomains[0]", status: StatusRefused}},
		{"srt allowedDomains localhost:5432", FormatSrt, `{"network":{"allowedDomains":["localhost:5432"]}}`,
			want{key: "network.allowedDomains[0]", status: StatusApplied}},
		{"srt allowedDomains bad", FormatSrt, `{"network":{"allowedDomains":["https://x.com/"]}}`,
			want{key: "network.allowedDomains[0]", status: StatusRefused}},
		{"srt deniedDomains outside", FormatSrt, `{"network":{"allowedDomains":["github.com"],"deniedDomains":["malicious.com"]}}`,
			want{key: "network.deniedDomains[0]", status: StatusHeld, check: hosts("github.com")}},
		{"srt deniedDomains drops allowed", FormatSrt, `{"network":{"allowedDomains":["github.com","a.example.com"],"deniedDomains":["*.example.com"]}}`,
			want{key: "network.allowedDomains[1]", status: StatusHeld, check: hosts("github.com")}},
		{"srt deniedDomains exception", FormatSrt, `{"network":{"allowedDomains":["*.github.com"],"deniedDomains":["gist.github.com"]}}`,
			want{key: "network.deniedDomains[0]", status: StatusRefused}},
		{"srt deniedDomains wildcard exception", FormatSrt, `{"network":{"allowedDomains":["*.github.com"],"deniedDomains":["*.gist.github.com"]}}`,
			want{key: "network.deniedDomains[0]", status: StatusRefused}},
		{"srt deniedDomains other port", FormatSrt, `{"network":{"allowedDomains":["*.github.com"],"deniedDomains":["gist.github.com:22"]}}`,
			want{key: "network.deniedDomains[0]", status: StatusHeld, check: hosts("*.github.com")}},
		{"srt deniedDomains all", FormatSrt, `{"network":{"allowedDomains":["github.com","*.npmjs.org"],"deniedDomains":["*"]}}`,
			want{key: "network.deniedDomains[0]", status: StatusHeld, check: hosts()}},
		{"srt deniedDomainReasons", FormatSrt, `{"network":{"deniedDomainReasons":{"github.com:22":"use https"}}}`,
			want{key: "network.deniedDomainReasons", status: StatusNotApplicable}},
		{"srt strictAllowlist", FormatSrt, `{"network":{"strictAllowlist":true}}`, want{key: "network.strictAllowlist", status: StatusHeld}},
		{"srt deniedResolvedAddresses private", FormatSrt, `{"network":{"deniedResolvedAddresses":["10.0.0.0/8","169.254.169.254"]}}`,
			want{key: "network.deniedResolvedAddresses[1]", status: StatusHeld}},
		{"srt deniedResolvedAddresses public", FormatSrt, `{"network":{"deniedResolvedAddresses":["203.0.113.7"]}}`,
			want{key: "network.deniedResolvedAddresses[0]", status: StatusRefused}},
		{"srt allowUnixSockets", FormatSrt, `{"network":{"allowUnixSockets":["/run/user/1000/lsp.sock"]}}`,
			want{key: "network.allowUnixSockets", status: StatusApplied}},
		{"srt allowUnixSockets docker.sock", FormatSrt, `{"network":{"allowUnixSockets":["/var/run/docker.sock"]}}`,
			want{key: "network.allowUnixSockets[0]", status: StatusRefused}},
		{"srt allowUnixSockets empty", FormatSrt, `{"network":{"allowUnixSockets":[]}}`, want{key: "network.allowUnixSockets", status: StatusHeld}},
		{"srt allowAllUnixSockets", FormatSrt, `{"network":{"allowAllUnixSockets":true}}`,
			want{key: "network.allowAllUnixSockets", status: StatusRefused, weakens: true}},
		{"srt allowLocalBinding", FormatSrt, `{"network":{"allowLocalBinding":true}}`,
			want{key: "network.allowLocalBinding", status: StatusHeld}},
		{"srt allowLocalBinding false", FormatSrt, `{"network":{"allowLocalBinding":false}}`, want{key: "network.allowLocalBinding", status: StatusHeld}},
		{"srt allowMachLookup", FormatSrt, `{"network":{"allowMachLookup":["com.1password.*"]}}`,
			want{key: "network.allowMachLookup", status: StatusRefused, weakens: true}},
		{"srt httpProxyPort", FormatSrt, `{"network":{"httpProxyPort":8080}}`, want{key: "network.httpProxyPort", status: StatusRefused}},
		{"srt socksProxyPort", FormatSrt, `{"network":{"socksProxyPort":1080}}`, want{key: "network.socksProxyPort", status: StatusRefused}},
		{"srt mitmProxy", FormatSrt, `{"network":{"mitmProxy":{"socketPath":"/x"}}}`, want{key: "network.mitmProxy", status: StatusRefused}},
		{"srt parentProxy", FormatSrt, `{"network":{"parentProxy":{}}}`, want{key: "network.parentProxy", status: StatusRefused}},
		{"srt tlsTerminate", FormatSrt, `{"network":{"tlsTerminate":{"excludeDomains":["x.example.com"]}}}`,
			want{key: "network.tlsTerminate", status: StatusRefused, missing: "tls"}},
		{"srt denyRead outside", FormatSrt, `{"filesystem":{"denyRead":["~/.ssh"]}}`, want{key: "filesystem.denyRead[0]", status: StatusHeld}},
		{"srt denyRead in workdir", FormatSrt, `{"filesystem":{"denyRead":["secrets"]}}`, want{key: "filesystem.denyRead[0]", status: StatusRefused}},
		{"srt denyRead in /etc", FormatSrt, `{"filesystem":{"denyRead":["/etc/shadow"]}}`, want{key: "filesystem.denyRead[0]", status: StatusRefused}},
		{"srt denyRead glob", FormatSrt, `{"filesystem":{"denyRead":["**/.env"]}}`, want{key: "filesystem.denyRead[0]", status: StatusRefused}},
		{"srt denyRead reopened", FormatSrt, `{"filesystem":{"denyRead":["/work"],"allowRead":["."]}}`, want{key: "filesystem.denyRead[0]", status: StatusHeld}},
		{"srt denyRead not reopened", FormatSrt, `{"filesystem":{"denyRead":["/work"]}}`, want{key: "filesystem.denyRead[0]", status: StatusRefused}},
		{"srt allowRead", FormatSrt, `{"filesystem":{"allowRead":["~/.cache/mcp"]}}`,
			want{key: "filesystem.allowRead[0]", status: StatusApplied, check: func(p Policy) bool { return reflect.DeepEqual(p.Read, []string{"/home/me/.cache/mcp"}) }}},
		{"srt allowWrite dir", FormatSrt, `{"filesystem":{"allowWrite":["/srv/out/**"]}}`,
			want{key: "filesystem.allowWrite[0]", status: StatusApplied, check: func(p Policy) bool { return reflect.DeepEqual(p.Write, []string{"/srv/out"}) }}},
		{"srt allowWrite in workdir", FormatSrt, `{"filesystem":{"allowWrite":["src/"]}}`, want{key: "filesystem.allowWrite[0]", status: StatusHeld}},
		{"srt allowWrite tmp", FormatSrt, `{"filesystem":{"allowWrite":["/tmp"]}}`, want{key: "filesystem.allowWrite[0]", status: StatusHeld}},
		{"srt allowWrite home dot-dir", FormatSrt, `{"filesystem":{"allowWrite":["~/.kube"]}}`, want{key: "filesystem.allowWrite[0]", status: StatusRefused}},
		{"srt allowWrite glob", FormatSrt, `{"filesystem":{"allowWrite":["src/**/*.ts"]}}`, want{key: "filesystem.allowWrite[0]", status: StatusRefused}},
		{"srt denyWrite", FormatSrt, `{"filesystem":{"denyWrite":[".env"]}}`,
			want{key: "filesystem.denyWrite[0]", status: StatusApplied, check: func(p Policy) bool { return reflect.DeepEqual(p.Protect, []string{"/work/proj/.env"}) }}},
		{"srt denyWrite outside", FormatSrt, `{"filesystem":{"denyWrite":["~/sensitive-folder"]}}`, want{key: "filesystem.denyWrite[0]", status: StatusHeld}},
		{"srt disabled", FormatSrt, `{"filesystem":{"disabled":true}}`, want{key: "filesystem.disabled", status: StatusRefused, weakens: true}},
		{"srt allowGitConfig", FormatSrt, `{"filesystem":{"allowGitConfig":true}}`, want{key: "filesystem.allowGitConfig", status: StatusRefused, weakens: true}},
		{"srt credentials", FormatSrt, `{"credentials":{"files":[]}}`, want{key: "credentials", status: StatusRefused, missing: "secret"}},
		{"srt ignoreViolations", FormatSrt, `{"ignoreViolations":{"*":["/usr/bin"]}}`, want{key: "ignoreViolations", status: StatusNotApplicable}},
		{"srt enableWeakerNestedSandbox", FormatSrt, `{"enableWeakerNestedSandbox":true}`, want{key: "enableWeakerNestedSandbox", status: StatusRefused, weakens: true}},
		{"srt enableWeakerNestedSandbox false", FormatSrt, `{"enableWeakerNestedSandbox":false}`, want{key: "enableWeakerNestedSandbox", status: StatusHeld}},
		{"srt enableWeakerNetworkIsolation", FormatSrt, `{"enableWeakerNetworkIsolation":true}`, want{key: "enableWeakerNetworkIsolation", status: StatusRefused, weakens: true}},
		{"srt allowAppleEvents", FormatSrt, `{"allowAppleEvents":true}`, want{key: "allowAppleEvents", status: StatusRefused, weakens: true}},
		{"srt allowPty", FormatSrt, `{"allowPty":true}`, want{key: "allowPty", status: StatusRefused, weakens: true}},
		{"srt ripgrep", FormatSrt, `{"ripgrep":{"command":"rg"}}`, want{key: "ripgrep", status: StatusNotApplicable}},
		{"srt mandatoryDenySearchDepth", FormatSrt, `{"mandatoryDenySearchDepth":3}`, want{key: "mandatoryDenySearchDepth", status: StatusHeld}},
		{"srt seccomp", FormatSrt, `{"seccomp":{}}`, want{key: "seccomp", status: StatusNotApplicable}},
		{"srt bwrapPath", FormatSrt, `{"bwrapPath":"/usr/bin/bwrap"}`, want{key: "bwrapPath", status: StatusNotApplicable}},
		{"srt socatPath", FormatSrt, `{"socatPath":"/usr/bin/socat"}`, want{key: "socatPath", status: StatusNotApplicable}},
		{"srt javaAgentJarPath", FormatSrt, `{"javaAgentJarPath":"/x.jar"}`, want{key: "javaAgentJarPath", status: StatusNotApplicable}},
		{"srt windows", FormatSrt, `{"windows":{}}`, want{key: "windows", status: StatusNotApplicable}},
		{"srt git", FormatSrt, `{"git":{"safeDirectories":[]}}`, want{key: "git", status: StatusNotApplicable}},
		{"srt unknown key", FormatSrt, `{"netwrok":{}}`, want{key: "netwrok", status: StatusRefused}},

		{"claude enabled", FormatClaude, `{"sandbox":{"enabled":true}}`, want{key: "sandbox.enabled", status: StatusHeld}},
		{"claude failIfUnavailable", FormatClaude, `{"sandbox":{"failIfUnavailable":true}}`, want{key: "sandbox.failIfUnavailable", status: StatusHeld}},
		{"claude autoAllowBashIfSandboxed", FormatClaude, `{"sandbox":{"autoAllowBashIfSandboxed":true}}`, want{key: "sandbox.autoAllowBashIfSandboxed", status: StatusNotApplicable}},
		{"claude excludedCommands", FormatClaude, `{"sandbox":{"excludedCommands":["git","docker"]}}`,
			want{key: "sandbox.excludedCommands", status: StatusRefused, weakens: true}},
		{"claude allowUnsandboxedCommands", FormatClaude, `{"sandbox":{"allowUnsandboxedCommands":true}}`,
			want{key: "sandbox.allowUnsandboxedCommands", status: StatusRefused, weakens: true}},
		{"claude allowUnsandboxedCommands false", FormatClaude, `{"sandbox":{"allowUnsandboxedCommands":false}}`, want{key: "sandbox.allowUnsandboxedCommands", status: StatusHeld}},
		{"claude enableWeakerNestedSandbox", FormatClaude, `{"sandbox":{"enableWeakerNestedSandbox":true}}`,
			want{key: "sandbox.enableWeakerNestedSandbox", status: StatusRefused, weakens: true}},
		{"claude network.allowedDomains", FormatClaude, `{"sandbox":{"network":{"allowedDomains":["github.com"]}}}`,
			want{key: "sandbox.network.allowedDomains[0]", status: StatusApplied, check: hosts("github.com")}},
		{"claude network.allowUnixSockets", FormatClaude, `{"sandbox":{"network":{"allowUnixSockets":["~/.ssh/agent-socket"]}}}`,
			want{key: "sandbox.network.allowUnixSockets", status: StatusApplied}},
		{"claude network.allowAllUnixSockets", FormatClaude, `{"sandbox":{"network":{"allowAllUnixSockets":true}}}`,
			want{key: "sandbox.network.allowAllUnixSockets", status: StatusRefused, weakens: true}},
		{"claude network.allowLocalBinding", FormatClaude, `{"sandbox":{"network":{"allowLocalBinding":true}}}`,
			want{key: "sandbox.network.allowLocalBinding", status: StatusHeld}},
		{"claude network.httpProxyPort", FormatClaude, `{"sandbox":{"network":{"httpProxyPort":8080}}}`, want{key: "sandbox.network.httpProxyPort", status: StatusRefused}},
		{"claude network.socksProxyPort", FormatClaude, `{"sandbox":{"network":{"socksProxyPort":8081}}}`, want{key: "sandbox.network.socksProxyPort", status: StatusRefused}},
		{"claude filesystem.allowWrite", FormatClaude, `{"sandbox":{"filesystem":{"allowWrite":["/tmp/build"]}}}`,
			want{key: "sandbox.filesystem.allowWrite[0]", status: StatusApplied, check: func(p Policy) bool { return reflect.DeepEqual(p.Write, []string{"/tmp/build"}) }}},
		{"claude filesystem.allowWrite //", FormatClaude, `{"sandbox":{"filesystem":{"allowWrite":["//srv/build"]}}}`,
			want{key: "sandbox.filesystem.allowWrite[0]", status: StatusApplied, check: func(p Policy) bool { return reflect.DeepEqual(p.Write, []string{"/srv/build"}) }}},
		{"claude filesystem.denyWrite", FormatClaude, `{"sandbox":{"filesystem":{"denyWrite":["/etc","/usr/local/bin"]}}}`, want{key: "sandbox.filesystem.denyWrite[1]", status: StatusHeld}},
		{"claude filesystem.denyRead", FormatClaude, `{"sandbox":{"filesystem":{"denyRead":["~/.aws/credentials"]}}}`, want{key: "sandbox.filesystem.denyRead[0]", status: StatusHeld}},
		{"claude filesystem.allowRead", FormatClaude, `{"sandbox":{"filesystem":{"allowRead":["."]}}}`, want{key: "sandbox.filesystem.allowRead[0]", status: StatusHeld}},
		{"claude permissions Edit allow", FormatClaude, `{"permissions":{"allow":["Edit(/docs/**)"]}}`, want{key: "permissions.allow[0]", status: StatusHeld}},
		{"claude permissions Edit deny", FormatClaude, `{"permissions":{"deny":["Edit(//work/proj/package.json)"]}}`,
			want{key: "permissions.deny[0]", status: StatusApplied, check: func(p Policy) bool { return reflect.DeepEqual(p.Protect, []string{"/work/proj/package.json"}) }}},
		{"claude permissions Read deny", FormatClaude, `{"permissions":{"deny":["Read(~/.aws/**)"]}}`, want{key: "permissions.deny[0]", status: StatusHeld}},
		{"claude permissions WebFetch", FormatClaude, `{"permissions":{"allow":["WebFetch(domain:example.com)"]}}`,
			want{key: "permissions.allow[0]", status: StatusApplied, check: hosts("example.com")}},
		{"claude permissions Bash", FormatClaude, `{"permissions":{"allow":["Bash(npm run lint)"]}}`, want{key: "permissions.allow", status: StatusNotApplicable}},
		{"claude other key", FormatClaude, `{"model":"x"}`, want{key: "model", status: StatusNotApplicable}},
		{"claude unknown sandbox key", FormatClaude, `{"sandbox":{"enabeld":true}}`, want{key: "sandbox.enabeld", status: StatusRefused}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			s, err := parseTestSettings(t, tt.format, tt.js)
			o, ok := outcome(s, tt.want.key)
			if !ok || o.Status != tt.want.status {
				t.Fatalf("%s: %+v (found %v), want %s; all: %+v", tt.want.key, o, ok, tt.want.status, s.Keys)
			}
			var se *SettingsError
			switch {
			case tt.want.status == StatusRefused && !errors.As(err, &se):
				t.Fatalf("err %v, want a *SettingsError", err)
			case tt.want.status == StatusRefused && (se.Weakens != tt.want.weakens || se.Missing != tt.want.missing || !errors.Is(err, ErrInvalid)):
				t.Fatalf("err %+v: weakens %v missing %q, want %v %q", se, se.Weakens, se.Missing, tt.want.weakens, tt.want.missing)
			case tt.want.status == StatusRefused && (!strings.Contains(err.Error(), tt.want.key) || strings.Contains(err.Error(), "\n")):
				t.Fatalf("err %q does not name %s on one line", err, tt.want.key)
			case tt.want.status != StatusRefused && err != nil:
				t.Fatalf("err %v", err)
			}
			if tt.want.check != nil && !tt.want.check(s.Policy) {
				t.Fatalf("policy %+v", s.Policy)
			}
		})
	}
}

// TestSettingsDocExamples reads the tools' own documented examples
// (testdata/settings/README.md names each source) and checks the first
// refusal, that every top-level key got an outcome, and that the import
// (the policy as a profile) reads back as the same policy.
func TestSettingsDocExamples(t *testing.T) {
	for _, tt := range []struct {
		file    string
		refused string // the key of the first refusal; "" = none
		check   func(Policy) bool
	}{
		{"srt-complete.json", "network.allowUnixSockets[0]", func(p Policy) bool {
			// docker.sock grants host root: refused as --unix-socket
			// refuses it, naming --unix-socket-unsafe.
			return len(p.AllowHosts) == 6 && reflect.DeepEqual(p.Protect, []string{"/work/proj/.env", "/work/proj/config/production.json"}) && len(p.Write) == 0
		}},
		{"srt-mcp.json", "", func(p Policy) bool { return len(p.AllowHosts) == 0 && len(p.Write) == 0 && len(p.Protect) == 0 }},
		{"srt-github.json", "", func(p Policy) bool {
			return reflect.DeepEqual(p.AllowHosts, []string{"github.com", "*.github.com", "lfs.github.com", "api.github.com"})
		}},
		{"srt-restrict.json", "", func(p Policy) bool {
			return reflect.DeepEqual(p.Protect, []string{"/work/proj/.env", "/work/proj/secrets"})
		}},
		{"srt-workspace.json", "", func(p Policy) bool { return len(p.Read) == 0 && len(p.Write) == 0 }},
		{"srt-tls.json", "network.tlsTerminate", nil},
		{"claude-sandbox.json", "sandbox.excludedCommands", func(p Policy) bool {
			return reflect.DeepEqual(p.AllowHosts, []string{"github.com", "*.npmjs.org", "registry.yarnpkg.com"}) && reflect.DeepEqual(p.Write, []string{"/tmp/build"})
		}},
		{"claude-permissions.json", "permissions.deny[2]", nil},
	} {
		t.Run(tt.file, func(t *testing.T) {
			b, err := os.ReadFile(filepath.Join("testdata", "settings", tt.file))
			if err != nil {
				t.Fatal(err)
			}
			format := DetectSettingsFormat(b)
			if want := FormatSrt; strings.HasPrefix(tt.file, "claude") {
				want = FormatClaude
				if format != want {
					t.Fatalf("format %s, want %s", format, want)
				}
			} else if format != want {
				t.Fatalf("format %s, want %s", format, want)
			}
			s, err := ParseSettings(format, b, testBase, Policy{Workdir: testBase.Workdir})
			var se *SettingsError
			switch {
			case tt.refused == "" && err != nil:
				t.Fatalf("refused: %v", err)
			case tt.refused != "" && (!errors.As(err, &se) || se.Key != tt.refused):
				t.Fatalf("err %v, want the first refusal at %s", err, tt.refused)
			}
			var top map[string]json.RawMessage
			_ = json.Unmarshal(b, &top)
			for k := range top {
				found := false
				for _, o := range s.Keys {
					if o.Key == k || strings.HasPrefix(o.Key, k+".") || strings.HasPrefix(o.Key, k+"[") {
						found = true
					}
				}
				if !found {
					t.Errorf("key %s has no outcome: %+v", k, s.Keys)
				}
			}
			if tt.check != nil && !tt.check(s.Policy) {
				t.Errorf("policy %+v", s.Policy)
			}
			prof, err := s.Profile()
			if err != nil {
				t.Fatal(err)
			}
			back, err := Parse(bytes.NewReader(prof))
			if err != nil {
				t.Fatalf("the import does not read back: %v\n%s", err, prof)
			}
			if !reflect.DeepEqual(back, s.Policy) {
				t.Errorf("read back %+v, want %+v", back, s.Policy)
			}
		})
	}
}

// TestUnixSocketsApplied: allowUnixSockets becomes --unix-socket, each
// path resolved as srt resolves it (~, relative to the workdir).
func TestUnixSocketsApplied(t *testing.T) {
	s, err := parseTestSettings(t, FormatClaude, `{"sandbox":{"network":{"allowUnixSockets":["~/.ssh/agent-socket","run/lsp.sock"]}}}`)
	o, _ := outcome(s, "sandbox.network.allowUnixSockets")
	if err != nil || o.Status != StatusApplied || !reflect.DeepEqual(s.Policy.UnixSockets, []string{"/home/me/.ssh/agent-socket", testBase.Workdir + "/run/lsp.sock"}) {
		t.Errorf("err %v, outcome %+v, unix sockets %v", err, o, s.Policy.UnixSockets)
	}
}
