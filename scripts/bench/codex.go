//go:build linux

package main

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"
)

// codexEnv is OpenAI Codex's `codex sandbox` (its Linux sandbox: bwrap, a
// seccomp filter and its own helper inside), the native binary that
// scripts/install-codex.sh installed.
type codexEnv struct {
	bin     string
	home    string // CODEX_HOME: codex refuses to make its helper aliases under /tmp
	version string
}

// newCodex checks that `codex sandbox` runs here (`codex --version` and
// one sandboxed `true` in work). home is its CODEX_HOME, outside /tmp. The
// error says why codex cannot be measured, with its output as evidence.
func newCodex(bin, home, work string) (*codexEnv, error) {
	if bin == "" {
		return nil, fmt.Errorf("no codex given (-codex); scripts/bench.sh installs it with scripts/install-codex.sh")
	}
	abs, err := filepath.Abs(bin)
	if err != nil {
		return nil, err
	}
	if home, err = filepath.Abs(home); err != nil {
		return nil, err
	}
	if err := os.MkdirAll(home, 0o700); err != nil {
		return nil, err
	}
	c := &codexEnv{bin: abs, home: home}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, abs, "--version").CombinedOutput()
	if err != nil {
		return nil, fmt.Errorf("codex --version: %v: %s", err, out)
	}
	c.version = strings.TrimSpace(string(out))
	if _, err := timeOnce(c.run(work, "/usr/bin/true")); err != nil {
		return nil, fmt.Errorf("codex sandbox -- true failed: %w", err)
	}
	return c, nil
}

// run is `codex sandbox -P :workspace -C WORK -- ARGV...`: the built-in
// workspace profile, which makes the workdir writable, the rest of the
// file system read-only and gives no network, the closest to sandbox-run's
// run without --allow-host. It runs as the caller (root here: codex has no
// uid switch), with the harness's environment minus proxy variables.
func (c *codexEnv) run(work string, argv ...string) variant {
	args := append([]string{"sandbox", "-P", ":workspace", "-C", work, "--"}, argv...)
	return variant{cmd: func(ctx context.Context) (*exec.Cmd, func()) {
		cmd := exec.CommandContext(ctx, c.bin, args...)
		cmd.Dir = work
		cmd.Env = append(envWithout(os.Environ(), "HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "NO_PROXY", "CODEX_HOME"), "CODEX_HOME="+c.home)
		return cmd, nil
	}}
}
