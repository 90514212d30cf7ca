package apparmor

import (
	"bytes"
	"crypto/sha256"
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"
	"strconv"
	"strings"
)

// Step is one change Apply makes: a file written, or a command run.
type Step struct {
	// Write is the host path of a file to write (root joined), with Data
	// as its content, a copy of From; empty for a command.
	Write string
	From  string
	Data  []byte
	// Argv is a command to run (host paths), when Write is empty.
	Argv []string
}

// String is the step as dry-run and Apply print it.
func (s Step) String() string {
	if s.Write != "" {
		return fmt.Sprintf("write %s (mode 0644, %d bytes: a copy of %s, sha256 %x)", s.Write, len(s.Data), s.From, sha256.Sum256(s.Data))
	}
	return "run " + strings.Join(s.Argv, " ")
}

// Plan is what setup will do. An empty Steps means nothing is to be done,
// and Facts say why.
type Plan struct {
	// Facts are the findings the plan rests on, one line each.
	Facts []string
	Steps []Step
}

// Decide turns the facts read from root into a Plan, or refuses with an
// *Error. It touches nothing. dryRun relaxes only what a plan can be
// shown without: being root, and reading the kernel's list of loaded
// profiles (root-only on Ubuntu).
func Decide(root string, h Host, dryRun bool) (Plan, error) {
	var p Plan
	if needed, err := decideDistro(&p, h); err != nil || !needed {
		return p, err
	}
	if err := decideHost(&p, root, h, dryRun); err != nil {
		return p, err
	}
	wrote, err := decideFile(&p, root, h)
	if err != nil {
		return p, err
	}
	at := func(q string) string { return filepath.Join(root, q) }
	switch {
	case wrote:
		// Whatever the kernel holds under these names did not come from
		// the file written now.
	case h.LoadedErr != nil:
		p.Facts = append(p.Facts, "the kernel's list of loaded profiles could not be read as uid "+strconv.Itoa(h.Euid)+" (root-only); loading assumed needed")
	case loadedEnforce(h.Loaded):
		p.Facts = append(p.Facts, "the kernel holds bwrap and unpriv_bwrap in enforce mode")
		return p, nil
	default:
		p.Facts = append(p.Facts, "the kernel does not hold bwrap and unpriv_bwrap in enforce mode"+loadedText(h.Loaded))
	}
	p.Steps = append(p.Steps, Step{Argv: []string{at(h.Parser), "-r", at(ProfilePath)}})
	return p, nil
}

// decideDistro refuses every host but Ubuntu 24.04 or later on Linux.
// needed is false where the kernel does not restrict user namespaces:
// Ubuntu's profile says it can break some uses on such a system, so it is
// not installed there.
func decideDistro(p *Plan, h Host) (needed bool, err error) {
	otherFix := "nothing to install on this host: bwrap needs no AppArmor profile from sandbox-run here; sandbox-run check names what this host lacks"
	if h.GOOS != "linux" {
		return false, &Error{What: "setup is for Linux only", Why: "this is " + h.GOOS, Fix: otherFix}
	}
	if h.OSReleaseErr != nil {
		return false, &Error{What: "cannot tell the distribution", Why: "no readable /etc/os-release: " + errText(h.OSReleaseErr),
			Fix: "sandbox-run setup only sets up Ubuntu 24.04 or later, which has /etc/os-release"}
	}
	id, ver, name := h.OSRelease["ID"], h.OSRelease["VERSION_ID"], h.OSRelease["PRETTY_NAME"]
	if name == "" {
		name = h.OSRelease["NAME"]
	}
	if id != "ubuntu" {
		return false, &Error{What: fmt.Sprintf("setup refuses %s (ID=%s)", orUnknown(name), orUnknown(id)),
			Why: "it only installs Ubuntu's own bwrap-userns-restrict profile, for Ubuntu 24.04 or later, whose AppArmor restricts unprivileged user namespaces; derivatives and other distributions are not set up",
			Fix: otherFix}
	}
	if !atLeast2404(ver) {
		return false, &Error{What: fmt.Sprintf("setup refuses Ubuntu %s", orUnknown(ver)),
			Why: "Ubuntu's bwrap-userns-restrict profile ships from Ubuntu 24.04 on (it needs AppArmor 4's abi)",
			Fix: "upgrade to Ubuntu 24.04 or later; before it, bwrap needs no AppArmor profile unless kernel.apparmor_restrict_unprivileged_userns is 1, which sandbox-run check shows"}
	}
	p.Facts = append(p.Facts, fmt.Sprintf("%s (ID=ubuntu, VERSION_ID=%s)", orUnknown(name), ver))
	switch h.Restrict {
	case 1:
		p.Facts = append(p.Facts, "kernel.apparmor_restrict_unprivileged_userns = 1: bwrap needs Ubuntu's bwrap-userns-restrict profile")
		return true, nil
	case -1:
		p.Facts = append(p.Facts, "nothing to do: the kernel has no kernel.apparmor_restrict_unprivileged_userns, so AppArmor does not restrict user namespaces and bwrap needs no profile")
	default:
		p.Facts = append(p.Facts, "nothing to do: "+fmt.Sprintf("kernel.apparmor_restrict_unprivileged_userns = %d, so AppArmor does not restrict user namespaces and bwrap needs no profile (Ubuntu's profile can break some uses on such a system)", h.Restrict))
	}
	return false, nil
}

// decideHost refuses a host where the profile cannot be loaded or would
// not be the one in force.
func decideHost(p *Plan, root string, h Host, dryRun bool) error {
	var conflicts []string
	for _, c := range h.Conflicts {
		conflicts = append(conflicts, filepath.Join(root, c))
	}
	switch {
	case h.Euid != 0 && !dryRun:
		return &Error{What: "setup needs root", Why: fmt.Sprintf("it writes %s and loads it into the kernel, and runs as uid %d", ProfilePath, h.Euid),
			Fix: "sudo sandbox-run setup (sandbox-run setup --dry-run shows every file and command first)"}
	case h.LoadedErr != nil && errors.Is(h.LoadedErr, fs.ErrNotExist):
		return &Error{What: "AppArmor is not enabled", Why: LoadedPath + " does not exist, so no profile can be loaded",
			Fix: "boot Ubuntu's kernel with AppArmor enabled (the default; check /sys/module/apparmor/parameters/enabled)"}
	case h.LoadedErr != nil && !dryRun:
		return &Error{What: "cannot read the kernel's AppArmor profiles", Why: errText(h.LoadedErr), Fix: "run sandbox-run setup as root on the host, not in a container"}
	case h.Parser == "":
		return &Error{What: "apparmor_parser not found", Why: "neither /usr/sbin/apparmor_parser nor /sbin/apparmor_parser exists", Fix: "apt-get install apparmor"}
	case !h.Bwrap:
		return &Error{What: BwrapPath + " not found", Why: "Ubuntu's profile attaches to " + BwrapPath + " only", Fix: "apt-get install bubblewrap"}
	case h.Disabled:
		return &Error{What: "the profile is disabled", Why: DisabledPath + " exists, so AppArmor skips the profile at boot",
			Fix: "if you want bwrap to work under the restriction: rm " + DisabledPath + ", then sandbox-run setup again"}
	case len(h.Conflicts) > 0:
		return &Error{What: "another AppArmor profile for bwrap is installed: " + strings.Join(conflicts, ", "),
			Why: "two profiles for " + BwrapPath + " replace each other, and which one the kernel holds depends on load order; a hand-written one is usually unconfined, leaving everything bwrap starts unconfined",
			Fix: "remove it (apparmor_parser -R " + conflicts[0] + ", then rm " + conflicts[0] + "; the same for any other named), then sandbox-run setup again"}
	}
	return nil
}

// decideFile plans the profile file. wrote says a step writes it.
func decideFile(p *Plan, root string, h Host) (wrote bool, err error) {
	at := func(q string) string { return filepath.Join(root, q) }
	switch {
	case h.InstalledLink:
		return false, &Error{What: at(ProfilePath) + " is a symbolic link", Why: "setup neither follows nor replaces it: the profile there must be a file of its own",
			Fix: "remove the link (rm " + at(ProfilePath) + "), then sandbox-run setup again"}
	case h.InstalledErr == nil:
		if err := CheckProfile(h.Installed); err != nil {
			return false, &Error{What: at(ProfilePath) + " is not Ubuntu's bwrap-userns-restrict profile", Why: err.Error(),
				Fix: "remove it (apparmor_parser -R " + at(ProfilePath) + ", then rm it), then sandbox-run setup again"}
		}
		same := "the same as " + at(SourcePath)
		switch {
		case h.SourceErr != nil:
			same = "as Ubuntu's apparmor package installs it"
		case !bytes.Equal(h.Installed, h.Source):
			same = "it differs from " + at(SourcePath) + " and is kept as it is"
		}
		p.Facts = append(p.Facts, at(ProfilePath)+" is Ubuntu's profile ("+same+")")
		return false, nil
	case !errors.Is(h.InstalledErr, fs.ErrNotExist):
		return false, &Error{What: "cannot read " + at(ProfilePath), Why: errText(h.InstalledErr), Fix: "remove it if it is not a regular file, then sandbox-run setup again"}
	case h.SourceErr != nil && errors.Is(h.SourceErr, fs.ErrNotExist):
		return false, &Error{What: "Ubuntu's bwrap-userns-restrict profile is not installed", Why: SourcePath + " does not exist",
			Fix: "apt-get install apparmor-profiles, then sandbox-run setup again"}
	case h.SourceErr != nil:
		return false, &Error{What: "cannot read " + at(SourcePath), Why: errText(h.SourceErr), Fix: "reinstall it: apt-get install --reinstall apparmor-profiles"}
	}
	if err := CheckProfile(h.Source); err != nil {
		return false, &Error{What: at(SourcePath) + " is not Ubuntu's bwrap-userns-restrict profile", Why: err.Error(),
			Fix: "reinstall it: apt-get install --reinstall apparmor-profiles"}
	}
	p.Facts = append(p.Facts, at(ProfilePath)+" does not exist")
	p.Steps = append(p.Steps, Step{Write: at(ProfilePath), From: at(SourcePath), Data: h.Source})
	return true, nil
}

// atLeast2404 compares an Ubuntu VERSION_ID ("24.04", "25.10").
func atLeast2404(v string) bool {
	maj, min, ok := strings.Cut(v, ".")
	a, err1 := strconv.Atoi(maj)
	b, err2 := strconv.Atoi(min)
	if !ok || err1 != nil || err2 != nil {
		return false
	}
	return a > 24 || a == 24 && b >= 4
}

func loadedText(m map[string]string) string {
	var s []string
	for _, n := range []string{"bwrap", "unpriv_bwrap"} {
		if mode, ok := m[n]; ok {
			s = append(s, n+" ("+mode+")")
		}
	}
	if len(s) == 0 {
		return " (neither is loaded)"
	}
	return " (it holds " + strings.Join(s, ", ") + ")"
}

func orUnknown(s string) string {
	if s == "" {
		return "unknown"
	}
	return s
}

func errText(err error) string {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return pe.Path + ": " + pe.Err.Error()
	}
	return err.Error()
}
