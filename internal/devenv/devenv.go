package devenv

import (
	"fmt"
	"io/fs"
	"maps"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/sandbox-run/sandbox-run/pathguard"
	"github.com/sandbox-run/sandbox-run/policy"
)

// Found is what Gather found of the caller's: the identity and the
// toolchains that can be carried in, and why others were left out.
type Found struct {
	Identity   Identity
	Toolchains []Toolchain
	// Skipped names each config file and toolchain left out, with why.
	Skipped []string
}

// Gather reads the caller's global git config and looks for the caller's
// toolchains, for a run of p. lookup is the caller's environment (HOME,
// XDG_CONFIG_HOME, GIT_CONFIG_GLOBAL, GOROOT, CARGO_HOME, ... and PATH).
// reachable says whether the sandbox's uid can list a host directory and
// reach it (as root the command runs as another uid); nil means it can.
// Gather refuses nothing: what it cannot carry safely it leaves out. Its
// walks go through rv's memo (nil: none), which the caller may share with
// the rest of the run's plan.
func Gather(rv *pathguard.Resolver, p policy.Policy, lookup func(string) (string, bool), reachable func(string) bool) Found {
	var f Found
	g, err := rv.Guard(p.Writable())
	if err != nil {
		// The run itself will refuse these writable directories.
		f.Skipped = append(f.Skipped, "everything: "+err.Error())
		return f
	}
	f.Identity, f.Skipped = readIdentity(g, lookup)
	home, _ := lookup("HOME")
	for _, t := range candidates(rv, env(lookup)) {
		if fi, err := rv.Stat(t.Bin); err != nil || !fi.IsDir() {
			continue // not installed: nothing to say
		}
		t.Show = slices.DeleteFunc(slices.Clone(t.Show), func(d string) bool { _, err := rv.Stat(d); return err != nil })
		why := unfit(rv, t, p, home, reachable)
		switch {
		case why == "":
			f.Toolchains = append(f.Toolchains, t)
		case why != "absent":
			f.Skipped = append(f.Skipped, t.Name+" "+t.Bin+": "+why)
		}
	}
	return f
}

// unfit says why t cannot be carried into a run of p ("absent" when it is
// not installed), "" when it can.
func unfit(rv *pathguard.Resolver, t Toolchain, p policy.Policy, home string, reachable func(string) bool) string {
	if fi, err := rv.Stat(t.Bin); err != nil || !fi.IsDir() {
		return "absent"
	}
	for _, d := range append([]string{t.Bin}, t.Show...) {
		r, err := rv.Resolve(d)
		if err != nil || !r.Exists {
			return "cannot be resolved"
		}
		for _, w := range p.Writable() {
			if policy.Within(r.Path, w) || policy.Within(w, r.Path) || policy.Within(d, w) || policy.Within(w, d) {
				return "overlaps the writable directory " + w
			}
		}
		if filepath.IsAbs(home) && policy.Within(filepath.Clean(home), d) {
			return "would show the whole home directory"
		}
		if reachable != nil && !reachable(r.Path) {
			return "the sandbox's uid cannot reach it (pass --read " + d + " after opening it to others, or run as that user)"
		}
	}
	for _, d := range t.Show {
		if !shown(d, nil) && !small(d, maxShownEntries) {
			return fmt.Sprintf("%s holds more than %d entries, which every run would search for sockets; pass --read %s and --env PATH=%s:... yourself", d, maxShownEntries, d, t.Bin)
		}
	}
	return ""
}

// maxShownEntries bounds a toolchain directory shown by default: every
// --read path is searched for sockets and FIFOs on every run (and a run
// over that search's budget is refused), so a large one (several rustup
// toolchains with their documentation) is left to an explicit --read.
const maxShownEntries = 50_000

// small reports whether the tree at d has at most max entries.
func small(d string, max int) bool {
	n := 0
	err := filepath.WalkDir(d, func(string, fs.DirEntry, error) error {
		if n++; n > max {
			return fs.SkipAll
		}
		return nil
	})
	return err == nil && n <= max
}

// systemShown are the host paths every mechanism shows read-only.
var systemShown = []string{"/usr", "/bin", "/sbin", "/lib", "/lib64", "/etc"}

// Apply carries f into p: the identity as git's GIT_CONFIG_COUNT
// variables (unless p already sets or passes any variable that names git
// config, which then wins whole), the toolchains ahead on PATH and their
// directories in Read (those outside the system paths, once).
func (f Found) Apply(p *policy.Policy) {
	if pairs := f.Identity.pairs(); len(pairs) > 0 && !setsGitConfig(*p) {
		env := make(map[string]string, len(p.Env)+2*len(pairs)+1)
		for k, v := range p.Env {
			env[k] = v
		}
		env["GIT_CONFIG_COUNT"] = strconv.Itoa(len(pairs))
		for i, kv := range pairs {
			env["GIT_CONFIG_KEY_"+strconv.Itoa(i)] = kv[0]
			env["GIT_CONFIG_VALUE_"+strconv.Itoa(i)] = kv[1]
		}
		p.Env = env
	}
	for _, t := range f.Toolchains {
		if !slices.Contains(p.Toolchains, t.Bin) {
			p.Toolchains = append(p.Toolchains, t.Bin)
		}
		for _, d := range t.Show {
			if !shown(d, p.Read) {
				p.Read = append(p.Read, d)
			}
		}
	}
}

// shown reports whether d is a system path or under one of read.
func shown(d string, read []string) bool {
	for _, s := range append(append([]string(nil), systemShown...), read...) {
		if policy.Within(d, s) {
			return true
		}
	}
	return false
}

// setsGitConfig reports whether p names a variable of git's config
// channel itself.
func setsGitConfig(p policy.Policy) bool {
	for _, k := range append(slices.Collect(maps.Keys(p.Env)), p.PassEnv...) {
		if k == "GIT_CONFIG_COUNT" || k == "GIT_CONFIG_PARAMETERS" || strings.HasPrefix(k, "GIT_CONFIG_KEY_") || strings.HasPrefix(k, "GIT_CONFIG_VALUE_") {
			return true
		}
	}
	return false
}

// IdentityKeys returns the git settings env carries through
// GIT_CONFIG_KEY_n, the keys only: what a report may say without the
// caller's name and address.
func IdentityKeys(env map[string]string) []string {
	n, err := strconv.Atoi(env["GIT_CONFIG_COUNT"])
	if err != nil || n <= 0 || n > 64 {
		return nil
	}
	var out []string
	for i := range n {
		if k, ok := env["GIT_CONFIG_KEY_"+strconv.Itoa(i)]; ok {
			out = append(out, k)
		}
	}
	return out
}

// Reachable is the reachable of Gather for a run whose command runs as
// another uid than the caller (as root): from mode bits, every directory
// from / to d must be searchable by others and d listable by them. ACLs
// are not read. The directories are looked up through rv's memo (nil:
// none): Gather passes a resolved d, whose ancestors its own walk has
// just looked up.
func Reachable(rv *pathguard.Resolver, d string) bool {
	if !filepath.IsAbs(d) || filepath.Clean(d) != d {
		return false
	}
	for p := d; ; p = filepath.Dir(p) {
		fi, err := rv.Stat(p)
		if err != nil || fi.Mode().Perm()&0o001 == 0 {
			return false
		}
		if p == d && fi.Mode().Perm()&0o004 == 0 {
			return false
		}
		if p == "/" {
			return true
		}
	}
}
