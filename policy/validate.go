package policy

import (
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"time"

	"github.com/sandbox-run/sandbox-run/allowlist"
	"github.com/sandbox-run/sandbox-run/internal/limits"
)

// MinMemory is the smallest memory limit a policy may set, the limits
// package's own floor (limits.MinMemory), checked here so that every mode
// refuses it the same way before anything runs.
const MinMemory = limits.MinMemory

// MinNoFile is the smallest open-file limit a policy may set
// (limits.MinNoFile): 0, 1 and 2 are always open, and with fewer than one
// more the command cannot even open its own executable's interpreter.
const MinNoFile = limits.MinNoFile

// Validate checks everything that can be checked without touching the
// system. It returns an error wrapping ErrInvalid (an *InvalidError) for the
// first problem found.
//
// It holds every rule on the values themselves, whatever the mode: paths
// (absolute, no NUL, control character or ".." component; writable ones
// outside the system directories and shared places, see Host), where
// protected paths may lie, variable names, the allow-list's syntax and
// address classes (allowlist.Parse), the mode's name, ids, sizes and the
// limits' minimums. Only once the values pass does it refuse what the
// mode cannot mean at all (tier 0 keeps no session), so that a bad value
// is refused the same way in every mode. A policy Validate accepts can
// still be refused by the host (a directory that does not exist, a
// mechanism that is missing, a limit the machine cannot hold); that is the
// sandbox's to say.
// Non-guarantee: an absolute Protect path is checked against Workdir,
// Write and Home; with a Session, whose home only the sandbox knows, a
// path outside those is left to the sandbox to refuse or accept.
func (p Policy) Validate() error {
	for _, check := range []func() error{p.validatePaths, p.validateHome, p.validateProtect, p.validateEnv,
		p.validateNet, p.validateHTTP, p.validateHandIn, p.validatePresets, p.validateMode, p.validateSizes, p.validateSecrets, p.validateForMode, p.validateToolchains} {
		if err := check(); err != nil {
			return err
		}
	}
	return nil
}

// validatePaths checks the workdir and the Write, Home, Read and cgroup
// paths.
func (p Policy) validatePaths() error {
	if p.Workdir == "" {
		return invalid("workdir", "empty", "pass --workdir DIR")
	}
	if err := checkPath("workdir", p.Workdir); err != nil {
		return err
	}
	for _, d := range append([]string{p.Workdir}, p.Write...) {
		if err := checkPath("write", d); err != nil {
			return err
		}
		if err := (Host{}).CheckWritable(d, d); err != nil {
			return err
		}
	}
	if p.Home != "" {
		if err := checkPath("home", p.Home); err != nil {
			return err
		}
		if err := (Host{}).CheckWritable(p.Home, p.Home); err != nil {
			return err
		}
	}
	for _, r := range p.Read {
		if err := checkPath("read", r); err != nil {
			return err
		}
	}
	if p.CgroupBase != "" {
		return checkPath("cgroup-base", p.CgroupBase)
	}
	return nil
}

// validateProtect checks the Protect and Unprotect names: a relative one
// names a path inside every writable directory, an absolute one must lie
// in one of them.
func (p Policy) validateProtect() error {
	for _, pr := range p.Protect {
		if err := noNUL("protect", pr); err != nil {
			return err
		}
		if err := CheckPath("protect", pr); err != nil {
			return err
		}
		if pr == "." || strings.HasPrefix(filepath.Clean(pr), "..") {
			return invalid("protect", fmt.Sprintf("%q does not name a path inside a writable directory", pr), "name a path such as .envrc")
		}
		if filepath.IsAbs(pr) && p.Session == "" && !InsideAny(filepath.Clean(pr), cleanAll(p.Writable())) {
			return invalid("protect", fmt.Sprintf("%s is not inside a writable directory", pr),
				"protect paths inside --workdir, a --write dir or --home, or name one relative to them such as .envrc")
		}
	}
	for _, u := range p.Unprotect {
		if !IsDefaultProtected(filepath.Clean(u)) {
			return invalid("unprotect", fmt.Sprintf("%q is not a built-in protected path", u),
				"name one of "+strings.Join(defaultProtected, ", "))
		}
	}
	return nil
}

// InsideAny reports whether p (absolute, clean) is one of dirs or lies in
// one (see Within).
func InsideAny(p string, dirs []string) bool {
	for _, d := range dirs {
		if Within(p, d) {
			return true
		}
	}
	return false
}

// validateEnv checks the variable names and values.
func (p Policy) validateEnv() error {
	for k, v := range p.Env {
		if err := checkEnvName(k); err != nil {
			return err
		}
		if err := noNUL("env "+k, v); err != nil {
			return err
		}
	}
	for _, k := range p.PassEnv {
		if !isEnvName(k) {
			return invalid("pass-env", fmt.Sprintf("%q is not a variable name", k),
				"name a variable of letters, digits and '_', not starting with a digit, such as HTTP_TOKEN")
		}
	}
	for _, k := range p.LLMEnv {
		if err := checkEnvName(k); err != nil {
			return err
		}
	}
	if len(p.LLMEnv) > 0 && p.LLMSocket == "" {
		return invalid("llm-env", "names a variable for an LLM channel that is not there", "pass --llm-socket PATH too")
	}
	return nil
}

// allowHostFix is the fix of every refused allow-list entry.
const allowHostFix = "write entries as host, host:port, host:*, *.domain, an IP or a CIDR"

// entryDetail is an *allowlist.EntryError's Detail (its text without the
// package's name), or the text of another error.
func entryDetail(err error) string {
	if ee := (*allowlist.EntryError)(nil); errors.As(err, &ee) {
		return ee.Detail()
	}
	return err.Error()
}

// validateNet checks the allow-list, entry by entry as allowlist.Parse
// reads it (the first bad entry is named), and the sockets.
func (p Policy) validateNet() error {
	for _, h := range p.AllowHosts {
		if err := noNUL("allow-host", h); err != nil {
			return err
		}
		if strings.TrimSpace(h) == "" {
			return invalid("allow-host", "empty entry", "name a host, *.domain, host:port or an IP")
		}
		if _, err := allowlist.Parse([]string{h}); err != nil {
			return invalid("allow-host", entryDetail(err), AllowHostFix(h))
		}
	}
	for _, s := range []struct{ field, path string }{{"egress-socket", p.EgressSocket}, {"llm-socket", p.LLMSocket}} {
		if s.path != "" {
			if err := checkPath(s.field, s.path); err != nil {
				return err
			}
		}
	}
	return nil
}

// validateMode checks the mode's name and the ids.
func (p Policy) validateMode() error {
	switch p.Sandbox {
	case "", ModeAuto, ModeBwrap, ModeSeatbelt, ModeLandlock, ModeOff, ModeGvisor:
	default:
		return invalid("sandbox", fmt.Sprintf("unknown mode %q", p.Sandbox), "use auto, bwrap, gvisor, landlock, seatbelt or off")
	}
	if p.UID < 0 || p.GID < 0 {
		return invalid("user", "negative id", "pass --user UID[:GID] with ids above 0")
	}
	return nil
}

// validateForMode refuses what the policy's mode cannot mean at all. It
// runs after every rule on the values themselves, so that a bad value is
// refused the same way in every mode.
func (p Policy) validateForMode() error {
	if p.Sandbox == ModeOff && (p.Session != "" || len(p.Caches) > 0) {
		return invalid("session", "tier 0 (--sandbox off) binds nothing, so it keeps no session and shares no cache", "leave out --session and --cache, or pass --home DIR")
	}
	return nil
}

// validateSizes checks the sizes, the limits and their minimums, and the
// timeout.
func (p Policy) validateSizes() error {
	if p.TmpSize < 0 {
		return invalid("tmp-size", "negative size", "pass a size such as 256M")
	}
	if p.ShmSize < 0 {
		return invalid("shm-size", "negative size", "pass a size such as 64M")
	}
	if p.Memory < 0 && p.Memory != NoMemoryLimit {
		return invalid("memory", "negative", "pass a size such as 512M, or none for no memory ceiling")
	}
	l := limits.Limits{Memory: max(p.Memory, 0), Pids: p.Pids, NoFile: p.NoFile, FSize: p.FSize, CPUTime: time.Duration(p.CPUTime)}
	var le *limits.InvalidError
	if err := l.Validate(); errors.As(err, &le) {
		return limitInvalid(le)
	}
	if p.Timeout < 0 {
		return invalid("timeout", "negative duration", "pass a duration such as 90s")
	}
	return nil
}

// limitInvalid is the policy's refusal of what limits.Limits.Validate
// refused: the flag's name, the reason and the fix.
func limitInvalid(le *limits.InvalidError) error {
	field := strings.ReplaceAll(le.Field, "_", "-")
	switch {
	case le.Min == 0:
		return invalid(field, "negative", "pass a positive value, or leave it out for no limit")
	case le.Field == "memory":
		return invalid(field, fmt.Sprintf("%d bytes is below the minimum of %d (1M): not even an exec succeeds in less", le.Value, le.Min),
			"pass --memory 1M or more, or --memory none for no memory ceiling")
	case le.Field == "nofile":
		return invalid(field, fmt.Sprintf("%d leaves no descriptor beyond stdin, stdout and stderr", le.Value),
			fmt.Sprintf("pass --nofile %d or more, or leave it out for the inherited limit", le.Min))
	}
	return invalid(field, le.Error(), "pass a value the limit accepts")
}
