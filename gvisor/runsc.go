package gvisor

import (
	"fmt"
	"strings"
)

// Runsc is how runsc is started: its global flags, before the
// subcommand.
type Runsc struct {
	// Root is the private directory of runsc's container state.
	Root string
	// Rootless runs runsc as an unprivileged user (runsc --rootless): its
	// own user namespace instead of the host's root.
	Rootless bool
	// HostUDS lets the command connect to host Unix sockets bound into
	// the sandbox (the forwarded proxies and init's status socket).
	HostUDS bool
	// Platform is ptrace, systrap or kvm; empty leaves runsc's default.
	Platform string
	// Log is the file runsc writes its own log to; empty means stderr.
	Log string
}

// Args is runsc's argv for subcommand and its arguments. Cgroups are never
// configured (--ignore-cgroups): runsc would create them under the host's
// hierarchy and leave them behind when killed, and no limit is enforced
// through them (see the package doc).
func (r Runsc) Args(path, sub string, args ...string) []string {
	a := []string{path, "--root", r.Root, "--network", "none", "--ignore-cgroups"}
	if r.Rootless {
		a = append(a, "--rootless")
	}
	if r.HostUDS {
		a = append(a, "--host-uds", "open")
	}
	if r.Platform != "" {
		a = append(a, "--platform", r.Platform)
	}
	if r.Log != "" {
		a = append(a, "--log", r.Log)
	}
	a = append(a, sub)
	return append(a, args...)
}

// Version is what `runsc --version` printed.
type Version struct {
	Release string // "0.0~20221219.0", or "release-20240101.0"
	Spec    string // the OCI spec version it reads
}

// ParseVersion reads `runsc --version` output: "runsc version X" then
// "spec: Y". It fails on output without the version line.
func ParseVersion(out string) (Version, error) {
	var v Version
	for _, line := range strings.Split(out, "\n") {
		line = strings.TrimSpace(line)
		if s, ok := strings.CutPrefix(line, "runsc version "); ok {
			v.Release = strings.TrimSpace(s)
		}
		if s, ok := strings.CutPrefix(line, "spec: "); ok {
			v.Spec = strings.TrimSpace(s)
		}
	}
	if v.Release == "" {
		return v, fmt.Errorf("gvisor: no \"runsc version\" line in %q", first(out, 200))
	}
	return v, nil
}

func first(s string, n int) string {
	if len(s) > n {
		return s[:n]
	}
	return s
}

// DefaultPlatform reads the default of -platform from `runsc flags`
// output (`(default "ptrace")` on the flag's description line); "" when
// the output names none.
func DefaultPlatform(flagsOut string) string {
	lines := strings.Split(flagsOut, "\n")
	for i, line := range lines {
		if strings.TrimSpace(line) != "-platform string" || i+1 >= len(lines) {
			continue
		}
		_, rest, ok := strings.Cut(lines[i+1], `(default "`)
		if !ok {
			return ""
		}
		p, _, ok := strings.Cut(rest, `"`)
		if !ok || strings.ContainsAny(p, " \t") {
			return ""
		}
		return p
	}
	return ""
}
