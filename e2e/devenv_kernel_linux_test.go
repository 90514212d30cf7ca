package e2e

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sandbox-run/sandbox-run/internal/sandboxtest"
)

// callerHome makes a home directory for the caller of sandbox-run, open
// to others (as root the command runs as another uid), holding a git
// config with an identity and with what must never reach the command: a
// credential helper, an alias, a hooks path and an include.
func callerHome(t *testing.T) string {
	t.Helper()
	home, err := os.MkdirTemp("/tmp", "sbx-devenv-home-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(home) })
	os.Chmod(home, 0o755)
	cfg := "[user]\n\tname = Dev Person\n\temail = dev@example.org\n[init]\n\tdefaultBranch = trunk\n" +
		"[credential]\n\thelper = store\n[alias]\n\tzz = !echo ALIAS-RAN\n[core]\n\thooksPath = /nonexistent-hooks\n[include]\n\tpath = /etc/hostname\n"
	if err := os.WriteFile(filepath.Join(home, ".gitconfig"), []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	return home
}

// TestDevEnvGitCommit: git commit works in a fresh workdir with the
// caller's identity and default branch, while the caller's credential
// helper, alias and hooks path are not visible inside. Controls: the
// caller's config has them (host git reads them), and without --dev-env
// the commit has no identity.
func TestDevEnvGitCommit(t *testing.T) {
	needBwrap(t)
	if _, err := exec.LookPath("git"); err != nil {
		sandboxtest.Unavailable(t, "git", "apt-get install git")
	}
	home := callerHome(t)
	env := []string{"HOME=" + home, "XDG_CONFIG_HOME=" + filepath.Join(home, ".config")}
	host := exec.Command("git", "config", "--global", "--get", "credential.helper")
	host.Env = append(os.Environ(), env...)
	if out, err := host.Output(); err != nil || strings.TrimSpace(string(out)) != "store" {
		t.Fatalf("control: the caller's git config lacks the credential helper: %q %v", out, err)
	}
	script := `git init -q && git commit -q --allow-empty -m first && git log -1 --format='AUTHOR=%an <%ae>' && echo BRANCH=$(git symbolic-ref --short HEAD);
git config --get credential.helper; echo HELPER=$?; git config --get-regexp '^alias\.'; echo ALIAS=$?; git config --get core.hooksPath; echo HOOKS=$?; git zz 2>/dev/null; true`
	w := sandboxtest.WorkDir(t)
	r := runEnv(t, env, "", "run", "--workdir", w, "--report", filepath.Join(t.TempDir(), "r.json"), "--", "sh", "-c", script)
	if r.code != 0 {
		t.Fatalf("exit %d: %s%s", r.code, r.stdout, r.stderr)
	}
	for _, want := range []string{"AUTHOR=Dev Person <dev@example.org>\n", "BRANCH=trunk\n", "HELPER=1\n", "ALIAS=1\n", "HOOKS=1\n"} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("inside lacks %q:\n%s%s", want, r.stdout, r.stderr)
		}
	}
	if strings.Contains(r.stdout, "ALIAS-RAN") || strings.Contains(r.stdout, "store") {
		t.Errorf("the caller's alias or credential helper reached the command:\n%s", r.stdout)
	}
	// Control: without --dev-env, no identity.
	w2 := sandboxtest.WorkDir(t)
	r = runEnv(t, env, "", "run", "--workdir", w2, "--dev-env=false", "--", "sh", "-c", "git init -q && git commit -q --allow-empty -m first && git log -1 --format='AUTHOR=%an <%ae>'")
	if strings.Contains(r.stdout, "dev@example.org") {
		t.Errorf("control: identity present without --dev-env: %s", r.stdout)
	}
}

// TestDevEnvReport: the report names the identity's keys and the
// toolchains, never the name or address.
func TestDevEnvReport(t *testing.T) {
	needBwrap(t)
	home := callerHome(t)
	env := []string{"HOME=" + home, "XDG_CONFIG_HOME=" + filepath.Join(home, ".config")}
	rep := filepath.Join(t.TempDir(), "r.json")
	r := runEnv(t, env, "", "run", "--workdir", sandboxtest.WorkDir(t), "--report", rep, "--", "true")
	if r.code != 0 {
		t.Fatalf("exit %d: %s", r.code, r.stderr)
	}
	b, err := os.ReadFile(rep)
	if err != nil {
		t.Fatal(err)
	}
	s := string(b)
	if !strings.Contains(s, `"git_identity": [`) || !strings.Contains(s, `"user.email"`) {
		t.Errorf("report lacks the identity's keys:\n%s", s)
	}
	if strings.Contains(s, "dev@example.org") || strings.Contains(s, "Dev Person") {
		t.Errorf("report holds the identity's values:\n%s", s)
	}
}

// TestDevEnvToolchains: Go under /usr/local/go and a cargo-style bin in
// the caller's home are found under sh -c with a PATH that lacks them,
// the latter read-only; without --dev-env they are not found, and a
// command sandbox-run itself starts gets a hint naming the directory and
// --cache.
func TestDevEnvToolchains(t *testing.T) {
	needBwrap(t)
	home := callerHome(t)
	bin := filepath.Join(home, ".cargo", "bin")
	os.MkdirAll(bin, 0o755)
	os.Chmod(filepath.Join(home, ".cargo"), 0o755)
	if err := os.WriteFile(filepath.Join(bin, "sbx-hello-tool"), []byte("#!/bin/sh\necho HELLO-TOOL\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	env := []string{"HOME=" + home, "XDG_CONFIG_HOME=" + filepath.Join(home, ".config"), "PATH=/usr/bin:/bin", "GOROOT="}
	script := `sbx-hello-tool; touch ` + bin + `/planted 2>/dev/null && echo WROTE-TOOLCHAIN; go version 2>&1 | head -c 10; echo`
	w := sandboxtest.WorkDir(t)
	r := runEnv(t, env, "", "run", "--workdir", w, "--", "sh", "-c", script)
	if !strings.Contains(r.stdout, "HELLO-TOOL") {
		t.Errorf("the home toolchain was not found inside: %q %s", r.stdout, r.stderr)
	}
	if strings.Contains(r.stdout, "WROTE-TOOLCHAIN") {
		t.Errorf("the toolchain directory is writable inside")
	}
	_, goErr := os.Stat("/usr/local/go/bin/go")
	if goErr == nil && !strings.Contains(r.stdout, "go version") {
		t.Errorf("/usr/local/go/bin/go not found under sh -c: %q %s", r.stdout, r.stderr)
	}
	// Control: off, neither is found.
	r = runEnv(t, env, "", "run", "--workdir", w, "--dev-env=false", "--", "sh", "-c", script)
	if strings.Contains(r.stdout, "HELLO-TOOL") || strings.Contains(r.stdout, "go version") {
		t.Errorf("control: found without --dev-env: %q", r.stdout)
	}
	if goErr != nil {
		sandboxtest.Unavailable(t, "a Go toolchain in /usr/local/go", "install Go from go.dev/dl into /usr/local/go")
	}
	// The hint: sandbox-run starts go itself, with the caller's PATH
	// naming /usr/local/go/bin.
	env[2] = "PATH=/usr/local/go/bin:/usr/bin:/bin"
	r = runEnv(t, env, "", "run", "--workdir", w, "--dev-env=false", "--", "go", "version")
	if r.code != 127 || !strings.Contains(r.stderr, "/usr/local/go/bin") || !strings.Contains(r.stderr, "--cache go") || !strings.Contains(r.stderr, "--dev-env") {
		t.Errorf("not-found hint: exit %d, stderr %q", r.code, r.stderr)
	}
}
