package cli

import (
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/sandbox-run/sandbox-run/pathguard"
	"github.com/sandbox-run/sandbox-run/policy"
)

// policyFlag is one run flag that sets a policy field: given on the
// command line, it replaces the profile's value. set reads the flag's
// value from f and refuses what does not parse; the policy's own rules on
// the value (Policy.Validate) come after, the same for flags and profiles.
type policyFlag struct {
	name string
	set  func(f *runFlags, p *policy.Policy) error
}

// policyFlags are the run flags that set policy fields, in the order
// their errors are reported.
var policyFlags = []policyFlag{
	{"workdir", func(f *runFlags, p *policy.Policy) (err error) {
		p.Workdir, err = absPath("workdir", f.workdir)
		return err
	}},
	{"write", func(f *runFlags, p *policy.Policy) (err error) {
		p.Write, err = absPaths("write", f.write)
		return err
	}},
	{"read", func(f *runFlags, p *policy.Policy) (err error) {
		p.Read, err = absPaths("read", f.read)
		return err
	}},
	{"protect", func(f *runFlags, p *policy.Policy) error { p.Protect = f.protect; return nil }},
	{"env", setEnv},
	{"home", func(f *runFlags, p *policy.Policy) (err error) {
		p.Home, err = absPath("home", f.home)
		return err
	}},
	{"session", func(f *runFlags, p *policy.Policy) error { p.Session = f.session; return nil }},
	{"cache", func(f *runFlags, p *policy.Policy) error { p.Caches = f.caches; return nil }},
	{"pass-env", func(f *runFlags, p *policy.Policy) error { p.PassEnv = f.passEnv; return nil }},
	{"allow-host", func(f *runFlags, p *policy.Policy) error { p.AllowHosts = f.allowHost; return nil }},
	{"preset", func(f *runFlags, p *policy.Policy) error { p.Presets = f.presets; return nil }},
	{"allow-http", func(f *runFlags, p *policy.Policy) error { p.AllowHTTP = f.allowHTTP; return nil }},
	{"upstream-ca", func(f *runFlags, p *policy.Policy) (err error) {
		p.UpstreamCA, err = absPath("upstream-ca", f.upstreamCA)
		return err
	}},
	{"egress-socket", func(f *runFlags, p *policy.Policy) (err error) {
		p.EgressSocket, err = absPath("egress-socket", f.egressSocket)
		return err
	}},
	{"llm-socket", func(f *runFlags, p *policy.Policy) (err error) {
		p.LLMSocket, err = absPath("llm-socket", f.llmSocket)
		return err
	}},
	{"llm-env", func(f *runFlags, p *policy.Policy) error { p.LLMEnv = f.llmEnv; return nil }},
	{"ssh-agent", func(f *runFlags, p *policy.Policy) error { return f.handIn.sshAgent(p, os.LookupEnv) }},
	{"unix-socket", func(f *runFlags, p *policy.Policy) (err error) {
		p.UnixSockets, err = absPaths("unix-socket", f.handIn.sockets)
		return err
	}},
	{"unix-socket-unsafe", func(f *runFlags, p *policy.Policy) (err error) {
		p.UnixSocketsUnsafe, err = absPaths("unix-socket-unsafe", f.handIn.unsafe)
		return err
	}},
	{"host-port", func(f *runFlags, p *policy.Policy) error { p.HostPorts = f.handIn.hostPorts; return nil }},
	{"publish", func(f *runFlags, p *policy.Policy) error { p.Publish = f.handIn.publish; return nil }},
	{"secret", setSecrets},
	{"secret-in", setSecretIn},
	{"llm-key-env", func(f *runFlags, p *policy.Policy) error { p.LLMKeyEnv = f.llmKeyEnv; return nil }},
	{"ptrace", func(f *runFlags, p *policy.Policy) error { p.Ptrace = f.ptrace; return nil }},
	{"sandbox", func(f *runFlags, p *policy.Policy) error { p.Sandbox = policy.Mode(f.mode); return nil }},
	{"timeout", func(f *runFlags, p *policy.Policy) error {
		d, err := policy.ParseDuration(f.timeout)
		if err != nil {
			return fmt.Errorf("--timeout: %w; fix: e.g. --timeout 90s", err)
		}
		p.Timeout = policy.Duration(d)
		return nil
	}},
	{"memory", func(f *runFlags, p *policy.Policy) error {
		// policy.ParseMemory owns the spelling: "none" turns the default
		// ceiling off, and 0 is refused as ambiguous.
		n, err := policy.ParseMemory(f.memory)
		if err != nil {
			return fmt.Errorf("--memory: %w; fix: --memory none for no memory ceiling, or a size such as 512M", err)
		}
		p.Memory = n
		return nil
	}},
	{"fsize", sizeFlag("fsize", func(f *runFlags) string { return f.fsize }, func(p *policy.Policy) *int64 { return &p.FSize })},
	{"pids", countFlag("pids", func(f *runFlags) string { return f.pids }, func(p *policy.Policy) *int64 { return &p.Pids })},
	{"nofile", countFlag("nofile", func(f *runFlags) string { return f.nofile }, func(p *policy.Policy) *int64 { return &p.NoFile })},
	{"cpu-time", func(f *runFlags, p *policy.Policy) error {
		d, err := policy.ParseDuration(f.cpuTime)
		if err != nil {
			return fmt.Errorf("--cpu-time: %w; fix: e.g. --cpu-time 30s", err)
		}
		if d <= 0 {
			return fmt.Errorf("--cpu-time must be positive; fix: e.g. --cpu-time 30s")
		}
		p.CPUTime = policy.Duration(d)
		return nil
	}},
	{"cgroup-base", func(f *runFlags, p *policy.Policy) (err error) {
		p.CgroupBase, err = absPath("cgroup-base", f.cgroupBase)
		return err
	}},
	{"tmp-size", capFlag("tmp-size", "/tmp", "256M", func(f *runFlags) string { return f.tmpSize }, func(p *policy.Policy) *int64 { return &p.TmpSize })},
	{"shm-size", capFlag("shm-size", "/dev/shm", "64M", func(f *runFlags) string { return f.shmSize }, func(p *policy.Policy) *int64 { return &p.ShmSize })},
	{"user", func(f *runFlags, p *policy.Policy) error {
		uid, gid, err := parseUser(f.user)
		if err != nil {
			return err
		}
		if os.Geteuid() != 0 {
			return fmt.Errorf("--user applies only when sandbox-run runs as root; fix: drop --user (the sandbox runs as you)")
		}
		p.UID, p.GID = uid, gid
		return nil
	}},
}

// policy builds the policy: the profile (--config), then each flag of
// policyFlags that was given, then the defaults a flag stands for when
// neither names the value (the mode's default, the current directory).
func (f *runFlags) policy(getwd func() (string, error)) (policy.Policy, error) {
	var p policy.Policy
	if f.config != "" {
		cfg, err := hostPath("config", f.config)
		if err != nil {
			return p, err
		}
		if p, err = readProfile("config", cfg); err != nil {
			return p, err
		}
	}
	for _, pf := range policyFlags {
		if !f.fs.Changed(pf.name) {
			continue
		}
		if err := pf.set(f, &p); err != nil {
			return p, err
		}
	}
	if p.Sandbox == "" {
		p.Sandbox = policy.Mode(f.mode)
	}
	if p.Workdir == "" {
		wd, err := getwd()
		if err == nil {
			// $PWD may name the directory through a symlink; the sandbox
			// binds the directory itself, at its real path.
			wd, err = realDir(f.walks, wd)
		}
		if err != nil {
			return p, fmt.Errorf("cannot read the current directory: %w; fix: pass --workdir DIR", err)
		}
		p.Workdir = wd
	}
	return f.applySettingsAndPresets(p)
}

// realDir is filepath.EvalSymlinks of the directory wd, through rv's memo
// when wd is absolute and clean (as Getwd gives it).
func realDir(rv *pathguard.Resolver, wd string) (string, error) {
	if rv == nil || !filepath.IsAbs(wd) || filepath.Clean(wd) != wd {
		return filepath.EvalSymlinks(wd)
	}
	r, err := rv.Resolve(wd)
	if err == nil && !r.Exists {
		err = &fs.PathError{Op: "lstat", Path: r.Path, Err: fs.ErrNotExist}
	}
	return r.Path, err
}

// absPaths makes each path of a repeatable --flag absolute. Paths from
// flags may be relative to the current directory; paths in a profile must
// be absolute (Validate refuses others), since what they would be relative
// to depends on where the harness happened to start sandbox-run.
func absPaths(flag string, s []string) ([]string, error) {
	out := make([]string, 0, len(s))
	for _, v := range s {
		a, err := absPath(flag, v)
		if err != nil {
			return nil, err
		}
		out = append(out, a)
	}
	return out, nil
}

// setEnv adds the --env KEY=VALUE pairs to a copy of the profile's Env.
func setEnv(f *runFlags, p *policy.Policy) error {
	m := make(map[string]string, len(p.Env)+len(f.env))
	for k, v := range p.Env {
		m[k] = v
	}
	for _, kv := range f.env {
		k, v, ok := strings.Cut(kv, "=")
		if !ok || k == "" {
			return fmt.Errorf("--env %q is not KEY=VALUE; fix: write --env NAME=value", redactKV(kv))
		}
		// Cloned: the argv bytes are scrubbed after parsing.
		m[strings.Clone(k)] = strings.Clone(v)
	}
	p.Env = m
	return nil
}

// sizeFlag sets a limit given as a size (ParseSize's spelling); zero is
// refused: leaving the flag out means no limit.
func sizeFlag(flag string, val func(*runFlags) string, dst func(*policy.Policy) *int64) func(*runFlags, *policy.Policy) error {
	return func(f *runFlags, p *policy.Policy) error {
		s := val(f)
		n, err := policy.ParseSize(s)
		if err != nil {
			return fmt.Errorf("--%s: %w; fix: e.g. --%s 512M", flag, err, flag)
		}
		if n <= 0 {
			return fmt.Errorf("--%s %q: want a positive size such as 512M; fix: e.g. --%s 512M", flag, s, flag)
		}
		*dst(p) = n
		return nil
	}
}

// countFlag sets a limit given as a whole number, written plainly
// (no sign, no leading zero); zero is refused as for sizeFlag.
func countFlag(flag string, val func(*runFlags) string, dst func(*policy.Policy) *int64) func(*runFlags, *policy.Policy) error {
	return func(f *runFlags, p *policy.Policy) error {
		s := val(f)
		var n int64
		_, err := fmt.Sscanf(s, "%d", &n)
		if err != nil || fmt.Sprint(n) != s || n <= 0 {
			return fmt.Errorf("--%s %q: want a positive whole number; fix: e.g. --%s 64", flag, s, flag)
		}
		*dst(p) = n
		return nil
	}
}

// capFlag sets the size of a private file system (what, e.g. /tmp); zero
// is refused, since in the policy it would mean the default, not "none".
func capFlag(flag, what, eg string, val func(*runFlags) string, dst func(*policy.Policy) *int64) func(*runFlags, *policy.Policy) error {
	return func(f *runFlags, p *policy.Policy) error {
		n, err := policy.ParseSize(val(f))
		if err != nil {
			return fmt.Errorf("--%s: %w; fix: e.g. --%s %s", flag, err, flag, eg)
		}
		if n == 0 {
			return fmt.Errorf("--%s 0 would leave %s uncapped; fix: pass a size such as %s", flag, what, eg)
		}
		*dst(p) = n
		return nil
	}
}
