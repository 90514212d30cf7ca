//go:build linux

package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"
)

// srtEnv is Anthropic's sandbox-runtime (srt), installed by
// scripts/install-srt.sh, with the settings files of the equivalent
// configurations.
type srtEnv struct {
	node, cli string
	version   string

	settingsNone    string // writes: the workdir; network: nothing
	settingsExample string // the same, allowedDomains ["example.com"]
	settingsHost    string // the same, allowedDomains [the test host]
}

// srtSettings is the part of srt's settings file (see its README) used here.
type srtSettings struct {
	Network struct {
		AllowedDomains []string `json:"allowedDomains"`
		DeniedDomains  []string `json:"deniedDomains"`
	} `json:"network"`
	Filesystem struct {
		DenyRead   []string `json:"denyRead"`
		AllowWrite []string `json:"allowWrite"`
		DenyWrite  []string `json:"denyWrite"`
	} `json:"filesystem"`
}

// newSRT checks that srt runs here (`srt --version` and one sandboxed
// `true`) and writes its settings files into dir. The error says why srt
// cannot be measured, with its output as evidence.
func newSRT(cliPath, work, dir string) (*srtEnv, error) {
	if cliPath == "" {
		return nil, fmt.Errorf("no srt given (-srt); scripts/bench.sh installs it with scripts/install-srt.sh")
	}
	node, err := exec.LookPath("node")
	if err != nil {
		return nil, fmt.Errorf("node not found: %w", err)
	}
	abs, err := filepath.Abs(cliPath)
	if err != nil {
		return nil, err
	}
	s := &srtEnv{node: node, cli: abs}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, node, cliPath, "--version").CombinedOutput()
	if err != nil {
		return nil, fmt.Errorf("srt --version: %v: %s", err, out)
	}
	s.version = strings.TrimSpace(string(out))
	write := func(name string, allowed []string) (string, error) {
		var st srtSettings
		st.Network.AllowedDomains = allowed
		st.Network.DeniedDomains = []string{}
		st.Filesystem.DenyRead = []string{}
		st.Filesystem.AllowWrite = []string{work}
		st.Filesystem.DenyWrite = []string{}
		b, _ := json.MarshalIndent(st, "", "  ")
		p := filepath.Join(dir, name)
		return p, os.WriteFile(p, b, 0o644)
	}
	if s.settingsNone, err = write("srt-none.json", []string{}); err != nil {
		return nil, err
	}
	if s.settingsExample, err = write("srt-example.json", []string{"example.com"}); err != nil {
		return nil, err
	}
	if _, err := timeOnce(s.run(s.settingsNone, work, "/usr/bin/true")); err != nil {
		return nil, fmt.Errorf("srt -- true failed: %w", err)
	}
	return s, nil
}

// setHost writes the settings that allow the test host (an IP literal).
func (s *srtEnv) setHost(dir, work, host string) error {
	var st srtSettings
	st.Network.AllowedDomains = []string{host}
	st.Network.DeniedDomains = []string{}
	st.Filesystem.DenyRead = []string{}
	st.Filesystem.AllowWrite = []string{work}
	st.Filesystem.DenyWrite = []string{}
	b, _ := json.MarshalIndent(st, "", "  ")
	s.settingsHost = filepath.Join(dir, "srt-host.json")
	return os.WriteFile(s.settingsHost, b, 0o644)
}

// run is `srt --settings FILE -- ARGV...` in the workdir. srt gets the
// harness's environment minus proxy variables (it sets its own).
func (s *srtEnv) run(settings, work string, argv ...string) variant {
	args := append([]string{s.cli, "--settings", settings, "--"}, argv...)
	return variant{cmd: func(ctx context.Context) (*exec.Cmd, func()) {
		c := exec.CommandContext(ctx, s.node, args...)
		c.Dir = work
		c.Env = envWithout(os.Environ(), "HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "NO_PROXY")
		return c, nil
	}}
}

// envWithout drops the named variables, in either case.
func envWithout(env []string, names ...string) []string {
	var out []string
next:
	for _, kv := range env {
		k, _, _ := strings.Cut(kv, "=")
		for _, n := range names {
			if strings.EqualFold(k, n) {
				continue next
			}
		}
		out = append(out, kv)
	}
	return out
}
