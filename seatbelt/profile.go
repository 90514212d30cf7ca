package seatbelt

import (
	"crypto/rand"
	"crypto/sha256"
	_ "embed"
	"encoding/hex"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/sandbox-run/sandbox-run/policy"
)

// base is the fixed part of every profile (see base.sbpl).
//
//go:embed base.sbpl
var base string

// ErrInvalidOptions marks Options that Render cannot use (a bad tag or
// port, a relative TmpDir).
var ErrInvalidOptions = errors.New("seatbelt: invalid options")

// Options are the facts of one run that the profile needs besides the
// policy. They come from the runner; Render never probes the system.
type Options struct {
	// Tag is written into every deny rule as its message, so that the
	// run's denials can be told apart in the unified log. It must be 8 to
	// 64 bytes of [A-Za-z0-9_-]; NewTag makes one. Required.
	Tag string
	// TmpDir is the run's private temporary directory (TMPDIR), readable
	// and writable. Absolute, with its symbolic links already resolved.
	// Empty means none.
	TmpDir string
	// ProxyPort is the loopback port of the egress proxy: the command may
	// connect to localhost on it. Zero means no egress at all.
	ProxyPort int
	// LLMPort is the loopback port of the LLM channel. Zero means none.
	LLMPort int
	// DeveloperDir is the developer directory xcode-select points at
	// (/private/var/db/xcode_select_link), resolved: readable, with its
	// app bundle's SharedFrameworks. Absolute; empty means only the
	// Command Line Tools, which every profile can read.
	DeveloperDir string
	// Terminals are the terminal devices the command inherits as its
	// standard input, output or error (/dev/ttysNNN): readable, writable
	// and open to ioctl, so that isatty(3), raw mode and the window size
	// work. Each must be /dev/tty followed by an optional 's' and digits.
	Terminals []string
}

// Profile is a rendered SBPL profile. Only Render makes one, so a Profile
// always holds a policy that validated and strings that were escaped.
type Profile struct {
	text string
	tag  string
}

// String returns the profile's SBPL text, as passed to sandbox-exec -p.
func (p Profile) String() string { return p.text }

// Tag returns the tag that marks the profile's denials.
func (p Profile) Tag() string { return p.tag }

// Digest returns the SHA-256 of the profile's text, in hex, for reports.
func (p Profile) Digest() string {
	s := sha256.Sum256([]byte(p.text))
	return hex.EncodeToString(s[:])
}

// NewTag returns a fresh random tag for Options.Tag.
func NewTag() string {
	var b [8]byte
	rand.Read(b[:])
	return "sandbox-run-" + hex.EncodeToString(b[:])
}

func validTag(t string) bool {
	if len(t) < 8 || len(t) > 64 {
		return false
	}
	for i := 0; i < len(t); i++ {
		c := t[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_') {
			return false
		}
	}
	return true
}

// Canonical returns the spelling of an absolute path that Seatbelt matches
// against: Seatbelt compares the path of the file as the kernel resolved
// it, and on macOS /tmp, /var and /etc are symbolic links into /private.
// Canonical cleans p and rewrites those three prefixes; it does not touch
// the file system, so any other symbolic link on the way must be resolved
// by the caller (the runner does, with filepath.EvalSymlinks).
func Canonical(p string) string {
	p = filepath.Clean(p)
	for _, alias := range []string{"/tmp", "/var", "/etc"} {
		if p == alias || strings.HasPrefix(p, alias+"/") {
			return "/private" + p
		}
	}
	return p
}

// Render turns p into a Seatbelt profile. It is a pure function of its
// arguments.
//
// The profile is, in order:
//
//  1. (version 1) and (deny default), the default deny carrying the tag;
//  2. the fixed rules of base.sbpl: process exec and fork, signals and
//     process information within the sandbox, a short list of sysctls and
//     Mach services, devices, and reads of / and /System (not
//     /System/Volumes);
//  3. reads of the system roots (systemRoots) and of DeveloperDir, the
//     package managers' var and etc denied again within them except what
//     TLS, git and fonts need, Security.framework's trust services when
//     there is a proxy, and the inherited Terminals;
//  4. metadata reads (stat, not listing) of every directory above a
//     system root or a path the policy names, so that getcwd and realpath
//     work;
//  5. reads of the --read paths;
//  6. reads and writes of the workdir, the --write directories and TmpDir,
//     each write rule excluding the protected paths inside it;
//  7. network-outbound over TCP to localhost on ProxyPort and LLMPort, and
//     nothing else: no UDP, no other address, no DNS, no Unix socket, no
//     bind;
//  8. last, because Seatbelt applies the last rule that matches: the
//     protected paths in any letter case, the directories that lead to
//     them, and git's metadata at any depth below each writable root
//     (protect.go), each denial carrying the tag.
//
// Every path is written in its Canonical spelling. Render returns an error
// wrapping policy.ErrInvalid when p does not validate, ErrInvalidOptions
// for bad options, and ErrUnsafeString (an *UnsafeStringError) when a path
// cannot be written safely as an SBPL string.
func Render(p policy.Policy, opts Options) (Profile, error) {
	if err := p.Validate(); err != nil {
		return Profile{}, err
	}
	return RenderGrants(GrantsOf(p), opts)
}

// Grants are what a profile grants and holds of the file system: the
// paths of a run's plan, as a mechanism that matches paths translates
// them. The zero value grants nothing but the system's paths.
type Grants struct {
	// Writable are the directories read and written (the workdir and
	// --write); Read the --read paths.
	Writable, Read []string
	// Protected are the paths never written, inside a writable
	// directory or not, whether they exist or not.
	Protected []string
	// Ptrace allows the task ports of the sandbox's own processes.
	Ptrace bool
}

// GrantsOf is what p grants and holds, its paths as written.
func GrantsOf(p policy.Policy) Grants {
	p = p.WithDefaults()
	return Grants{Writable: p.Writable(), Read: p.Read, Protected: p.ProtectedPaths(), Ptrace: p.Ptrace}
}

// RenderGrants is Render of a plan's grants: the same profile, its paths
// taken from g. Every path must be absolute (ErrInvalidOptions
// otherwise); each is written in its Canonical spelling.
func RenderGrants(g Grants, opts Options) (Profile, error) {
	forms, err := render(g, opts)
	if err != nil {
		return Profile{}, err
	}
	var b strings.Builder
	b.WriteString("(version 1)\n")
	b.WriteString(header(opts.Tag).String())
	b.WriteString("\n\n")
	b.WriteString(base)
	for _, f := range forms {
		if f.comment != "" {
			b.WriteString("\n;; ")
			b.WriteString(f.comment)
			b.WriteString("\n")
			continue
		}
		b.WriteString(f.node.String())
		b.WriteByte('\n')
	}
	return Profile{text: b.String(), tag: opts.Tag}, nil
}

// form is one line of the policy-made part: a rule or a comment. Comments
// are fixed text of this package, never data.
type form struct {
	node    node
	comment string
}

func header(tag string) node {
	return list(sym("deny"), sym("default"), withMessage(tag))
}

func withMessage(tag string) node {
	return list(sym("with"), sym("message"), str(tag))
}

// render builds the policy-made part as nodes. Tests compare what the
// profile text reads back as with these nodes.
func render(g Grants, opts Options) ([]form, error) {
	if err := checkOptions(opts); err != nil {
		return nil, err
	}
	rp, err := checkPaths(g, &opts)
	if err != nil {
		return nil, err
	}

	var out []form
	rule := func(n ...node) { out = append(out, form{node: list(n...)}) }
	comment := func(s string) { out = append(out, form{comment: s}) }

	// 3. The system roots, and the package managers' state within them.
	systemRules(opts, opts.Tag, rule, comment)
	// 4. Metadata of the directories above every root.
	ancestorRules(rp, opts, rule, comment)
	// 5 and 6. The policy's read-only and writable paths.
	pathRules(rp, rule, comment)
	// 7. Network, and --ptrace.
	networkRules(opts, rule, comment)
	if g.Ptrace {
		comment("--ptrace: task ports of processes in this sandbox (debuggers).")
		rule(sym("allow"), sym("mach-priv-task-port"), list(sym("target"), sym("same-sandbox")))
	}
	// 8. Protected paths and git metadata, last so that no allow above can
	// win over them.
	protectedRules(rp.writable, rp.protected, opts.Tag, rule, comment)
	return out, nil
}

// profilePaths are the policy's paths as the profile names them:
// canonical, and checked to be safe inside an SBPL string.
type profilePaths struct {
	writable, read, protected []string
	tmp                       string // the run's private TMPDIR, if any
}

// checkPaths returns g's paths for the profile, and makes opts's
// developer dir canonical; an unsafe string is an *UnsafeStringError, a
// relative path ErrInvalidOptions.
func checkPaths(g Grants, opts *Options) (profilePaths, error) {
	var rp profilePaths
	var err error
	check := func(field, s string) string {
		switch {
		case err != nil:
		case !filepath.IsAbs(s):
			err = fmt.Errorf("%w: %s path %q is not absolute", ErrInvalidOptions, field, s)
		default:
			if why := checkString(s); why != "" {
				err = &UnsafeStringError{Field: field, Value: s, Reason: why}
			}
		}
		return s
	}
	for _, w := range g.Writable {
		rp.writable = append(rp.writable, check("write", Canonical(w)))
	}
	for _, r := range g.Read {
		rp.read = append(rp.read, check("read", Canonical(r)))
	}
	for _, pr := range g.Protected {
		rp.protected = append(rp.protected, check("protect", Canonical(pr)))
	}
	if opts.TmpDir != "" {
		rp.tmp = check("tmp dir", Canonical(opts.TmpDir))
	}
	if opts.DeveloperDir != "" {
		opts.DeveloperDir = check("developer dir", Canonical(opts.DeveloperDir))
	}
	return rp, err
}

// ancestorRules allows the metadata (stat, not listing) of the
// directories above the system's and the policy's roots.
func ancestorRules(rp profilePaths, opts Options, rule func(...node), comment func(string)) {
	var ancestors []string
	roots := append(append(append(slices.Clone(rp.writable), rp.read...), rp.tmp), systemAncestorRoots(opts)...)
	for _, r := range roots {
		if r == "" {
			continue
		}
		for d := filepath.Dir(r); d != "/"; d = filepath.Dir(d) {
			ancestors = append(ancestors, d)
		}
	}
	slices.Sort(ancestors)
	ancestors = slices.Compact(ancestors)
	if len(ancestors) > 0 {
		comment("Metadata (stat, not listing) of the directories above the system's and the policy's paths.")
		for _, a := range ancestors {
			rule(sym("allow"), sym("file-read-metadata"), list(sym("literal"), str(a)))
		}
	}
}

// pathRules allows the read-only paths, then the writable directories
// minus the protected paths inside each, then the private TMPDIR.
func pathRules(rp profilePaths, rule func(...node), comment func(string)) {
	if len(rp.read) > 0 {
		comment("--read: read-only.")
		for _, r := range rp.read {
			rule(sym("allow"), sym("file-read*"), list(sym("subpath"), str(r)))
		}
	}
	comment("The workdir and --write directories: read and write, but not the protected paths.")
	for _, w := range rp.writable {
		rule(sym("allow"), sym("file-read*"), list(sym("subpath"), str(w)))
		filter := []node{sym("require-all"), list(sym("subpath"), str(w))}
		for _, pr := range rp.protected {
			if policy.Within(pr, w) {
				filter = append(filter, list(sym("require-not"), list(sym("subpath"), str(pr))))
			}
		}
		rule(sym("allow"), sym("file-write*"), list(filter...))
	}
	if rp.tmp != "" {
		comment("The run's private TMPDIR.")
		rule(sym("allow"), sym("file-read*"), sym("file-write*"), list(sym("subpath"), str(rp.tmp)))
	}
}

// networkRules allows TCP to the loopback ports of the egress proxy and
// the LLM channel only. "remote tcp", not "remote ip": ip also matches
// UDP, and the runner holds these ports for TCP only, so a UDP datagram
// to localhost:PORT could reach whoever binds the port's UDP side.
func networkRules(opts Options, rule func(...node), comment func(string)) {
	comment("Network: TCP to the loopback ports of the egress proxy and the LLM channel only.")
	for _, port := range []int{opts.ProxyPort, opts.LLMPort} {
		if port != 0 {
			rule(sym("allow"), sym("network-outbound"),
				list(sym("remote"), sym("tcp"), str("localhost:"+strconv.Itoa(port))))
		}
	}
}

// checkOptions refuses Options that Render cannot use.
func checkOptions(opts Options) error {
	if !validTag(opts.Tag) {
		return fmt.Errorf("%w: tag %q must be 8 to 64 bytes of [A-Za-z0-9_-]", ErrInvalidOptions, opts.Tag)
	}
	for _, port := range []int{opts.ProxyPort, opts.LLMPort} {
		if port < 0 || port > 65535 {
			return fmt.Errorf("%w: port %d out of range", ErrInvalidOptions, port)
		}
	}
	if opts.TmpDir != "" && !filepath.IsAbs(opts.TmpDir) {
		return fmt.Errorf("%w: tmp dir %q is not absolute", ErrInvalidOptions, opts.TmpDir)
	}
	if opts.DeveloperDir != "" && !filepath.IsAbs(opts.DeveloperDir) {
		return fmt.Errorf("%w: developer dir %q is not absolute", ErrInvalidOptions, opts.DeveloperDir)
	}
	for _, t := range opts.Terminals {
		if !validTerminal(t) {
			return fmt.Errorf("%w: terminal %q is not /dev/tty[s]N", ErrInvalidOptions, t)
		}
	}
	return nil
}
