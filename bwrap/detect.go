// Package bwrap finds bubblewrap, learns what it can do, and turns a
// sandbox description into its argument stream.
//
// # Guarantees
//
// Features are read from the option list that bwrap --help prints, never
// inferred from the version number alone: distributions backport options
// (Debian's 0.8.0 has --bind-fd and --ro-bind-fd). Args refuses any argument
// holding a NUL byte, because bwrap's --args stream is NUL-separated and such
// a byte would let a value become an option.
//
// # Non-guarantees
//
// This package does not vet paths: that is pathguard's job. It does not run
// the sandbox. Advisories name known weaknesses of old versions; a version
// without an advisory is not thereby free of bugs.
package bwrap

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os/exec"
	"strings"
)

// Features are the options of one bwrap binary that sandbox-run relies on
// or adapts to.
type Features struct {
	Args             bool // --args FD
	ClearEnv         bool // --clearenv (0.5.0)
	DisableUserns    bool // --disable-userns (0.8.0)
	BindFD           bool // --bind-fd, --ro-bind-fd
	InfoFD           bool // --info-fd
	AsPid1           bool // --as-pid-1
	Size             bool // --size (tmpfs size)
	Perms            bool // --perms
	UnshareCgroupTry bool // --unshare-cgroup-try
	Seccomp          bool // --seccomp FD
}

// Info describes one bwrap binary.
type Info struct {
	Path     string
	Version  Version
	Features Features
}

// ErrNotFound means no bwrap binary could be found or run.
var ErrNotFound = errors.New("bwrap: not found")

// versionNumber picks the version out of "bubblewrap 0.8.0". Plain string
// work rather than a package-level regexp: every run of sandbox-run, and its
// init inside the sandbox, would pay to compile one at start-up.
func versionNumber(out string) (string, bool) {
	for _, line := range strings.Split(out, "\n") {
		f := strings.Fields(line)
		if len(f) >= 2 && f[0] == "bubblewrap" {
			v := strings.TrimPrefix(f[1], "v")
			if v != "" && v[0] >= '0' && v[0] <= '9' {
				return v, true
			}
		}
	}
	return "", false
}

// Parse builds an Info from the output of bwrap --version and bwrap --help.
// It is pure, so every feature set can be tested without that binary.
func Parse(path, versionOut, helpOut string) (*Info, error) {
	num, ok := versionNumber(versionOut)
	if !ok {
		return nil, fmt.Errorf("bwrap: %s: unrecognised --version output %q", path, firstLine(versionOut))
	}
	v, err := ParseVersion(num)
	if err != nil {
		return nil, fmt.Errorf("bwrap: %s: version %q: %w", path, num, err)
	}
	opts := map[string]bool{}
	for _, line := range strings.Split(helpOut, "\n") {
		if f := strings.Fields(line); len(f) > 0 && strings.HasPrefix(f[0], "--") {
			opts[f[0]] = true
		}
	}
	has := func(opt string) bool { return opts[opt] }
	f := Features{
		Args:             has("--args"),
		ClearEnv:         has("--clearenv"),
		DisableUserns:    has("--disable-userns"),
		BindFD:           has("--bind-fd") && has("--ro-bind-fd"),
		InfoFD:           has("--info-fd"),
		AsPid1:           has("--as-pid-1"),
		Size:             has("--size"),
		Perms:            has("--perms"),
		UnshareCgroupTry: has("--unshare-cgroup-try"),
		Seccomp:          has("--seccomp"),
	}
	return &Info{Path: path, Version: v, Features: f}, nil
}

// Detect runs path --version and path --help and parses them. path must be
// absolute; the caller decides which binary is trustworthy.
func Detect(ctx context.Context, path string) (*Info, error) {
	vo, ho, err := probe(ctx, path)
	if err != nil {
		return nil, err
	}
	return Parse(path, vo, ho)
}

func probe(ctx context.Context, path string) (versionOut, helpOut string, err error) {
	run := func(arg string) (string, error) {
		cmd := exec.CommandContext(ctx, path, arg)
		cmd.Env = []string{}
		var out bytes.Buffer
		cmd.Stdout = &out
		cmd.Stderr = &out
		err := cmd.Run()
		return out.String(), err
	}
	vo, err := run("--version")
	if err != nil {
		if errors.Is(err, exec.ErrNotFound) || isNotExist(err) {
			return "", "", fmt.Errorf("bwrap: %s: %w", path, ErrNotFound)
		}
		return "", "", fmt.Errorf("bwrap: %s --version: %w: %s", path, err, firstLine(vo))
	}
	ho, err := run("--help")
	if err != nil {
		return "", "", fmt.Errorf("bwrap: %s --help: %w", path, err)
	}
	return vo, ho, nil
}

// Required lists the options sandbox-run cannot enforce its policy without.
// A bwrap missing one is refused rather than used with less isolation.
func (i *Info) Required() error {
	var missing []string
	for name, ok := range map[string]bool{
		"--args": i.Features.Args, "--seccomp": i.Features.Seccomp,
		"--as-pid-1": i.Features.AsPid1, "--info-fd": i.Features.InfoFD,
	} {
		if !ok {
			missing = append(missing, name)
		}
	}
	if len(missing) > 0 {
		return fmt.Errorf("bwrap: %s %s lacks %s: install bubblewrap 0.4.0 or newer", i.Path, i.Version, strings.Join(missing, ", "))
	}
	return nil
}

// Advisory is a known weakness of the detected bwrap, with its fix.
type Advisory struct {
	ID     string `json:"id"`
	Detail string `json:"detail"`
	Fix    string `json:"fix"`
}

// v0120 is the first bubblewrap without the symlink mount-redirection
// class.
var v0120 = Version{n: [3]int{0, 12, 0}}

// Advisories returns what an operator should know about this bwrap. The
// result depends on the version and the detected features only.
func (i *Info) Advisories() []Advisory {
	var a []Advisory
	if i.Version.LessThan(v0120) {
		a = append(a, Advisory{
			ID: "symlink-mount-redirect",
			Detail: fmt.Sprintf("bubblewrap %s predates 0.12.0 and is open to the symlink mount-redirection class "+
				"(a link planted in a writable directory redirects a later mount onto the host)", i.Version),
			Fix: "install bubblewrap 0.12.0 or newer from a trusted source; until then sandbox-run's path guard refuses such binds itself",
		})
	}
	if !i.Features.DisableUserns {
		a = append(a, Advisory{
			ID:     "no-disable-userns",
			Detail: fmt.Sprintf("bubblewrap %s has no --disable-userns (0.8.0); nested user namespaces are blocked by the seccomp filter only", i.Version),
			Fix:    "install bubblewrap 0.8.0 or newer",
		})
	}
	if !i.Features.ClearEnv {
		a = append(a, Advisory{
			ID:     "no-clearenv",
			Detail: fmt.Sprintf("bubblewrap %s has no --clearenv (0.5.0); it is started with an empty environment instead", i.Version),
			Fix:    "none needed; install bubblewrap 0.5.0 or newer to have both",
		})
	}
	if !i.Features.BindFD {
		a = append(a, Advisory{
			ID:     "binds-by-path",
			Detail: fmt.Sprintf("bubblewrap %s has no --ro-bind-fd/--bind-fd: binds are made by path, leaving a race window between the check and the mount", i.Version),
			Fix:    "install a bubblewrap with --bind-fd (0.8.0 on Debian 12, 0.9.0 upstream)",
		})
	}
	return a
}

// AtLeast reports whether the detected version is at least v.
func (i *Info) AtLeast(v string) bool {
	w, err := ParseVersion(v)
	return err == nil && !i.Version.LessThan(w)
}

func firstLine(s string) string {
	s = strings.TrimSpace(s)
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		return s[:i]
	}
	return s
}

func isNotExist(err error) bool { return errors.Is(err, fs.ErrNotExist) }
