package devenv

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/sandbox-run/sandbox-run/pathguard"
	"github.com/sandbox-run/sandbox-run/policy"
)

func TestParseIdentity(t *testing.T) {
	for _, c := range []struct {
		name, text string
		want       Identity
	}{
		{"plain", "[user]\n\tname = Ada Lovelace\n\temail = ada@example.org\n[init]\n\tdefaultBranch = trunk\n",
			Identity{"Ada Lovelace", "ada@example.org", "trunk"}},
		{"case and quotes", "[User]\nNAME = \"Ada \\\"L\\\" Lovelace\" # comment\n", Identity{Name: `Ada "L" Lovelace`}},
		{"later wins", "[user]\nname = a\nname = b\n", Identity{Name: "b"}},
		{"subsection is not user", "[user \"x\"]\nname = a\n", Identity{}},
		{"everything else skipped", "[credential]\nhelper = store\n[alias]\nco = !rm -rf /\n[core]\nhooksPath = /tmp/h\n[include]\npath = ~/.other\n", Identity{}},
		{"continued line skipped", "[user]\nname = a \\\n b\n", Identity{}},
		{"control character skipped", "[user]\nname = \"a\\tb\"\n", Identity{}},
		{"unterminated quote skipped", "[user]\nname = \"a\n", Identity{}},
		{"inline after header", "[user] name = a\n", Identity{Name: "a"}},
		{"semicolon comment", "[user]\nemail = a@b ; x\n", Identity{Email: "a@b"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			var id Identity
			parseIdentity(c.text, &id)
			if id != c.want {
				t.Errorf("got %+v, want %+v", id, c.want)
			}
		})
	}
}

// TestGatherIdentityOnly: of a config with a credential helper, an alias,
// a hooks path and an include, only the three identity keys reach the
// policy, and the XDG file is read before ~/.gitconfig (which wins).
func TestGatherIdentityOnly(t *testing.T) {
	home := t.TempDir()
	os.MkdirAll(filepath.Join(home, ".config", "git"), 0o755)
	os.WriteFile(filepath.Join(home, ".config", "git", "config"), []byte("[user]\nname = From XDG\n[init]\ndefaultBranch = trunk\n"), 0o644)
	os.WriteFile(filepath.Join(home, ".gitconfig"), []byte("[user]\nname = From Home\nemail = h@example.org\n[credential]\nhelper = store\n[alias]\nx = !id\n[core]\nhooksPath = /h\n[include]\npath = /etc/passwd\n"), 0o644)
	work := t.TempDir()
	lookup := func(k string) (string, bool) { v, ok := map[string]string{"HOME": home}[k]; return v, ok }
	p := policy.Policy{Workdir: work}
	f := Gather(pathguard.NewResolver(), p, lookup, nil)
	if f.Identity != (Identity{"From Home", "h@example.org", "trunk"}) {
		t.Fatalf("identity %+v", f.Identity)
	}
	f.Apply(&p)
	want := map[string]string{"GIT_CONFIG_COUNT": "3", "GIT_CONFIG_KEY_0": "user.name", "GIT_CONFIG_VALUE_0": "From Home",
		"GIT_CONFIG_KEY_1": "user.email", "GIT_CONFIG_VALUE_1": "h@example.org", "GIT_CONFIG_KEY_2": "init.defaultBranch", "GIT_CONFIG_VALUE_2": "trunk"}
	if len(p.Env) != len(want) {
		t.Errorf("env %v, want exactly %v", p.Env, want)
	}
	for k, v := range want {
		if p.Env[k] != v {
			t.Errorf("%s=%q, want %q", k, p.Env[k], v)
		}
	}
	if got := IdentityKeys(p.Env); !slices.Equal(got, []string{"user.name", "user.email", "init.defaultBranch"}) {
		t.Errorf("IdentityKeys %v", got)
	}
	// The caller's own git config channel wins whole.
	q := policy.Policy{Workdir: work, Env: map[string]string{"GIT_CONFIG_COUNT": "0"}}
	f.Apply(&q)
	if len(q.Env) != 1 {
		t.Errorf("identity added over the caller's GIT_CONFIG_COUNT: %v", q.Env)
	}
}

// TestGatherRefusesWritable: a ~/.gitconfig inside a writable directory
// of the run (here the home is the workdir's child) is not read: the
// command could have written it.
func TestGatherRefusesWritable(t *testing.T) {
	work := t.TempDir()
	home := filepath.Join(work, "home")
	os.MkdirAll(filepath.Join(home, ".cargo", "bin"), 0o755)
	os.WriteFile(filepath.Join(home, ".gitconfig"), []byte("[user]\nname = planted\n"), 0o644)
	lookup := func(k string) (string, bool) { v, ok := map[string]string{"HOME": home}[k]; return v, ok }
	f := Gather(nil, policy.Policy{Workdir: work}, lookup, nil)
	if f.Identity != (Identity{}) {
		t.Errorf("identity read from a writable directory: %+v", f.Identity)
	}
	for _, tc := range f.Toolchains {
		if tc.Name == "cargo" {
			t.Errorf("toolchain in a writable directory carried: %+v", tc)
		}
	}
	// Control: the same files outside the writable set are read.
	f = Gather(pathguard.NewResolver(), policy.Policy{Workdir: t.TempDir()}, lookup, nil)
	if f.Identity.Name != "planted" {
		t.Errorf("control: identity not read outside the writable set: %+v (%v)", f.Identity, f.Skipped)
	}
	found := false
	for _, tc := range f.Toolchains {
		found = found || tc.Name == "cargo"
	}
	if !found {
		t.Errorf("control: cargo not found outside the writable set: %+v", f)
	}
}

func TestToolchains(t *testing.T) {
	home := t.TempDir()
	for _, d := range []string{".cargo/bin", ".rustup", ".pyenv/shims", ".nvm/versions/node/v20.1.0/bin", ".volta/bin"} {
		os.MkdirAll(filepath.Join(home, d), 0o755)
	}
	os.MkdirAll(filepath.Join(home, ".nvm/alias"), 0o755)
	os.WriteFile(filepath.Join(home, ".nvm/alias/default"), []byte("20.1.0\n"), 0o644)
	goroot := filepath.Join(t.TempDir(), "go")
	os.MkdirAll(filepath.Join(goroot, "bin"), 0o755)
	vars := map[string]string{"HOME": home, "GOROOT": goroot, "PATH": "/usr/bin"}
	lookup := func(k string) (string, bool) { v, ok := vars[k]; return v, ok }
	p := policy.Policy{Workdir: t.TempDir()}
	f := Gather(nil, p, lookup, nil)
	f.Apply(&p)
	wantBins := []string{filepath.Join(goroot, "bin"), filepath.Join(home, ".cargo/bin"), filepath.Join(home, ".volta/bin"),
		filepath.Join(home, ".pyenv/shims"), filepath.Join(home, ".nvm/versions/node/v20.1.0/bin")}
	if !slices.Equal(p.Toolchains, wantBins) {
		t.Errorf("toolchains\n got %v\nwant %v", p.Toolchains, wantBins)
	}
	for _, r := range []string{goroot, filepath.Join(home, ".cargo/bin"), filepath.Join(home, ".rustup"), filepath.Join(home, ".pyenv")} {
		if !slices.Contains(p.Read, r) {
			t.Errorf("%s not shown read-only: %v", r, p.Read)
		}
	}
	if slices.Contains(p.Read, filepath.Join(home, ".cargo")) {
		t.Errorf("~/.cargo (credentials.toml) shown whole: %v", p.Read)
	}
	if err := p.Validate(); err != nil {
		t.Errorf("policy with toolchains: %v", err)
	}
	if env, _ := p.Environ(nil); !slices.Contains(env, "PATH="+filepath.Join(goroot, "bin")+":"+filepath.Join(home, ".cargo/bin")+":"+
		filepath.Join(home, ".volta/bin")+":"+filepath.Join(home, ".pyenv/shims")+":"+filepath.Join(home, ".nvm/versions/node/v20.1.0/bin")+
		":/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin") {
		t.Errorf("PATH: %v", env)
	}
	// Unreachable by the sandbox's uid: left out and named.
	f = Gather(pathguard.NewResolver(), policy.Policy{Workdir: t.TempDir()}, lookup, func(string) bool { return false })
	if len(f.Toolchains) != 0 || len(f.Skipped) != 5 {
		t.Errorf("unreachable toolchains: carried %v, skipped %v", f.Toolchains, f.Skipped)
	}
}

func TestReachable(t *testing.T) {
	d := t.TempDir() // 0700
	if Reachable(nil, d) {
		t.Errorf("%s (0700) reported reachable by others", d)
	}
	if !Reachable(pathguard.NewResolver(), "/usr/bin") {
		t.Errorf("/usr/bin reported unreachable")
	}
}

func TestSmall(t *testing.T) {
	d := t.TempDir()
	for _, n := range []string{"a", "b", "c", "d"} {
		os.WriteFile(filepath.Join(d, n), nil, 0o644)
	}
	if small(d, 3) {
		t.Errorf("5 entries reported within 3")
	}
	if !small(d, 5) {
		t.Errorf("5 entries reported over 5")
	}
}

// TestGatherLooksEachPathUpOnce counts Gather's lookups through its
// Resolver for a fixed home, so the count follows from the paths alone:
// each existing component once, each absent one once per time it is asked
// for (absence is not remembered).
func TestGatherLooksEachPathUpOnce(t *testing.T) {
	r, err := pathguard.Resolve(t.TempDir())
	if err != nil || !r.Exists {
		t.Fatalf("resolve the temporary directory: %v", err)
	}
	home := r.Path
	for _, d := range []string{"work", "go/bin", ".cargo/bin", ".rustup"} {
		if err := os.MkdirAll(filepath.Join(home, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	vars := map[string]string{"HOME": home, "GOROOT": filepath.Join(home, "go"), "PATH": ""}
	lookup := func(k string) (string, bool) { v, ok := vars[k]; return v, ok }
	rv := pathguard.NewResolver()
	f := Gather(rv, policy.Policy{Workdir: filepath.Join(home, "work")}, lookup, nil)
	if len(f.Toolchains) != 2 {
		t.Fatalf("carried %+v, skipped %v; want go and cargo", f.Toolchains, f.Skipped)
	}
	// "/" and home's components; work, go, go/bin, .cargo, .cargo/bin,
	// .rustup; absent: .config (git's XDG file), .gitconfig, .volta,
	// .pyenv, .nvm, .local (fnm).
	want := 1 + strings.Count(home, "/") + 6 + 6
	if got := rv.Calls(); got != want {
		t.Errorf("Gather made %d lookups, want %d (each path once)", got, want)
	}
}
