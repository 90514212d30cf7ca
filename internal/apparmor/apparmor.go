// Package apparmor installs and loads Ubuntu's own bwrap-userns-restrict
// AppArmor profile, which lets bubblewrap create user namespaces on Ubuntu
// 24.04 and later where kernel.apparmor_restrict_unprivileged_userns is 1.
//
// The work is split in three: ReadHost gathers the facts from a root
// directory ("/" on a real host, a fake root in tests), Decide turns them
// into a Plan (files to write, commands to run) without touching anything,
// and Apply carries a Plan out.
//
// Guarantees:
//   - The only profile ever written is Ubuntu's: a byte-for-byte copy of
//     the apparmor-profiles package's file, and only after it was checked
//     to confine bwrap's children (unpriv_bwrap, audit deny capability)
//     and to hold no unconfined flag. A hand-written profile is never
//     produced, and an unconfined profile already attached to
//     /usr/bin/bwrap is refused, not kept beside it.
//   - An existing /etc/apparmor.d/bwrap-userns-restrict is never
//     overwritten: a valid one is kept (Ubuntu 25.04's apparmor package
//     installs it there itself), an invalid one is refused.
//   - Idempotent: when the profile file is in place and the kernel lists
//     bwrap and unpriv_bwrap in enforce mode, the Plan is empty and Apply
//     writes nothing and runs nothing.
//   - Any other distribution, an Ubuntu before 24.04, or a kernel without
//     the restriction switched on is refused or left alone with the
//     reason; nothing is written there.
//
// Not guaranteed: that the profile the kernel has loaded under the name
// bwrap came from this file (the kernel lists names and modes, not
// sources); that bwrap resolves to /usr/bin/bwrap for the caller (the
// profile attaches to that path only); that it was ever run against a
// real Ubuntu kernel by this project's tests, which use a fake root and a
// fake apparmor_parser.
package apparmor

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"

	"github.com/sandbox-run/sandbox-run/internal/fault"
)

// Where the facts live, relative to the root directory.
const (
	SourcePath   = "/usr/share/apparmor/extra-profiles/bwrap-userns-restrict"
	ProfilePath  = "/etc/apparmor.d/bwrap-userns-restrict"
	DisabledPath = "/etc/apparmor.d/disable/bwrap-userns-restrict"
	profileDir   = "/etc/apparmor.d"
	SysctlPath   = "/proc/sys/kernel/apparmor_restrict_unprivileged_userns"
	LoadedPath   = "/sys/kernel/security/apparmor/profiles"
	BwrapPath    = "/usr/bin/bwrap"
)

// osReleasePaths are read in order, as os-release(5) prescribes.
var osReleasePaths = []string{"/etc/os-release", "/usr/lib/os-release"}

// parserPaths are where Ubuntu's apparmor package puts apparmor_parser.
var parserPaths = []string{"/usr/sbin/apparmor_parser", "/sbin/apparmor_parser"}

// maxProfile bounds what is read of any profile file: Ubuntu's is about
// 2 KiB; anything this large is not it.
const maxProfile = 1 << 20

// ErrRefused marks every refusal and failure of setup. Callers exit 125.
// It is fault.ErrSetup, the sentinel of every refusal.
var ErrRefused = fault.ErrSetup

// Error says what could not be done, why, and the fix, in one line: it is
// sandbox-run's one such type (internal/fault.Error), the same as
// sandbox.SetupError.
type Error = fault.Error

// Host is what Decide decides from. ReadHost fills it from a root
// directory; tests may build one by hand.
type Host struct {
	GOOS string
	Euid int
	// OSRelease holds os-release's fields; nil when OSReleaseErr is set.
	OSRelease    map[string]string
	OSReleaseErr error
	// Restrict is kernel.apparmor_restrict_unprivileged_userns, -1 when
	// the kernel has no such setting.
	Restrict int
	// Source is Ubuntu's profile as the package ships it; SourceErr is
	// set (fs.ErrNotExist when absent) when it could not be read.
	Source    []byte
	SourceErr error
	// Installed is the profile in /etc/apparmor.d; InstalledErr as
	// SourceErr. InstalledLink says that path is a symbolic link.
	Installed     []byte
	InstalledErr  error
	InstalledLink bool
	// Disabled says /etc/apparmor.d/disable holds the profile's name, so
	// the boot-time load skips it.
	Disabled bool
	// Conflicts are other files in /etc/apparmor.d whose profiles attach
	// to /usr/bin/bwrap or are named bwrap (root-relative paths).
	Conflicts []string
	// Loaded maps the names of the profiles the kernel holds to their
	// modes; LoadedErr is set when the list could not be read.
	Loaded    map[string]string
	LoadedErr error
	// Parser is apparmor_parser's root-relative path, "" when absent.
	Parser string
	// Bwrap says /usr/bin/bwrap exists.
	Bwrap bool
}

// ReadHost reads the facts Decide needs from the tree at root ("/" on a
// real host). It never fails: what cannot be read is recorded as such.
func ReadHost(root string) Host {
	at := func(p string) string { return filepath.Join(root, p) }
	h := Host{GOOS: runtime.GOOS, Euid: os.Geteuid(), Restrict: -1}
	h.OSRelease, h.OSReleaseErr = readOSRelease(root)
	if b, err := os.ReadFile(at(SysctlPath)); err == nil {
		if v, err := strconv.Atoi(strings.TrimSpace(string(b))); err == nil {
			h.Restrict = v
		}
	}
	h.Source, h.SourceErr = readProfile(at(SourcePath))
	if fi, err := os.Lstat(at(ProfilePath)); err == nil && fi.Mode()&fs.ModeSymlink != 0 {
		h.InstalledLink = true
	} else {
		h.Installed, h.InstalledErr = readProfile(at(ProfilePath))
	}
	if _, err := os.Lstat(at(DisabledPath)); err == nil {
		h.Disabled = true
	}
	h.Conflicts = conflicts(root)
	if b, err := os.ReadFile(at(LoadedPath)); err == nil {
		h.Loaded = parseLoaded(b)
	} else {
		h.LoadedErr = err
	}
	for _, p := range parserPaths {
		if fi, err := os.Stat(at(p)); err == nil && fi.Mode().IsRegular() && fi.Mode()&0o111 != 0 {
			h.Parser = p
			break
		}
	}
	if fi, err := os.Stat(at(BwrapPath)); err == nil && fi.Mode().IsRegular() {
		h.Bwrap = true
	}
	return h
}

// readProfile reads a profile file, refusing one through a final symlink
// and one larger than any real profile.
func readProfile(p string) ([]byte, error) {
	f, err := os.Open(p)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if !fi.Mode().IsRegular() {
		return nil, fmt.Errorf("%s is not a regular file", p)
	}
	if fi.Size() > maxProfile {
		return nil, fmt.Errorf("%s is %d bytes, larger than any AppArmor profile of bwrap", p, fi.Size())
	}
	b := make([]byte, fi.Size())
	if _, err := f.ReadAt(b, 0); err != nil && fi.Size() > 0 {
		return nil, err
	}
	return b, nil
}

// readOSRelease parses the first os-release file that exists under root.
func readOSRelease(root string) (map[string]string, error) {
	var first error
	for _, p := range osReleasePaths {
		b, err := os.ReadFile(filepath.Join(root, p))
		if err != nil {
			if first == nil {
				first = err
			}
			continue
		}
		return ParseOSRelease(b), nil
	}
	return nil, first
}

// ParseOSRelease reads os-release(5) assignments: KEY=value, the value
// optionally in single or double quotes. Lines it cannot read are skipped.
func ParseOSRelease(b []byte) map[string]string {
	m := map[string]string{}
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		k, v, ok := strings.Cut(line, "=")
		if !ok {
			continue
		}
		if len(v) >= 2 && (v[0] == '"' || v[0] == '\'') && v[len(v)-1] == v[0] {
			v = v[1 : len(v)-1]
			if line[len(k)+1] == '"' {
				v = strings.NewReplacer(`\"`, `"`, `\\`, `\`, `\$`, `$`, "\\`", "`").Replace(v)
			}
		}
		m[k] = v
	}
	return m
}

// parseLoaded reads the kernel's list of loaded profiles
// (/sys/kernel/security/apparmor/profiles: one "NAME (MODE)" per line).
func parseLoaded(b []byte) map[string]string {
	m := map[string]string{}
	for _, line := range strings.Split(string(b), "\n") {
		line = strings.TrimSpace(line)
		i := strings.LastIndex(line, " (")
		if i <= 0 || !strings.HasSuffix(line, ")") {
			continue
		}
		m[line[:i]] = line[i+2 : len(line)-1]
	}
	return m
}

// conflicts lists the files directly in /etc/apparmor.d, other than
// Ubuntu's profile, that hold a profile for bwrap.
func conflicts(root string) []string {
	dir := filepath.Join(root, profileDir)
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil
	}
	var out []string
	for _, e := range ents {
		if !e.Type().IsRegular() || e.Name() == filepath.Base(ProfilePath) {
			continue
		}
		b, err := readProfile(filepath.Join(dir, e.Name()))
		if err == nil && attachesBwrap(b) {
			out = append(out, filepath.Join(profileDir, e.Name()))
		}
	}
	return out
}

// attachesBwrap says whether profile text declares a profile named bwrap
// or one that attaches to /usr/bin/bwrap (a header line, ending in "{"),
// as opposed to a rule that merely names the path.
func attachesBwrap(b []byte) bool {
	for _, line := range strings.Split(string(b), "\n") {
		line = strings.TrimSpace(line)
		if strings.HasPrefix(line, "#") || !strings.HasSuffix(line, "{") {
			continue
		}
		fields := strings.Fields(line)
		if len(fields) >= 2 && fields[0] == "profile" && fields[1] == "bwrap" {
			return true
		}
		for _, f := range fields {
			if f == BwrapPath {
				return true
			}
		}
	}
	return false
}

// CheckProfile says why b is not Ubuntu's bwrap-userns-restrict profile,
// or returns nil. It checks what makes that profile safe to load: bwrap's
// children run stacked with unpriv_bwrap, which denies every capability,
// and nothing in it is unconfined.
func CheckProfile(b []byte) error {
	var code []string
	for _, line := range strings.Split(string(b), "\n") {
		if i := strings.Index(line, "#"); i >= 0 {
			line = line[:i]
		}
		if line = strings.TrimSpace(line); line != "" {
			code = append(code, line)
		}
	}
	text := strings.Join(code, "\n")
	if strings.Contains(text, "unconfined") {
		return errors.New("it declares an unconfined profile, which would leave bwrap and every command it starts unconfined")
	}
	for _, want := range []string{"profile bwrap " + BwrapPath, "profile unpriv_bwrap", "&unpriv_bwrap", "audit deny capability"} {
		if !strings.Contains(text, want) {
			return fmt.Errorf("it lacks %q, so it is not Ubuntu's profile that confines bwrap's children", want)
		}
	}
	return nil
}

// ProfileLoaded says whether the kernel at root holds Ubuntu's two bwrap
// profiles in enforce mode (by name: see the package's non-guarantees).
func ProfileLoaded(root string) (bool, error) {
	b, err := os.ReadFile(filepath.Join(root, LoadedPath))
	if err != nil {
		return false, err
	}
	return loadedEnforce(parseLoaded(b)), nil
}

func loadedEnforce(m map[string]string) bool {
	return m["bwrap"] == "enforce" && m["unpriv_bwrap"] == "enforce"
}
