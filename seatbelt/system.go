package seatbelt

import (
	"path/filepath"
	"strings"
)

// systemRoots are the system directories every profile can read whole,
// besides /System (base.sbpl). They live here, not in base.sbpl, because
// Render also grants stat on every directory above them: Node's
// fs.realpathSync, Python's os.path.realpath and Go's filepath.EvalSymlinks
// lstat each component, so /opt must be stat-able for /opt/homebrew/bin/node
// to start.
var systemRoots = []string{
	"/usr",
	"/bin",
	"/sbin",
	// Package managers' prefixes: their programs and libraries. The state
	// and configuration under them are denied again below (pkgState).
	"/opt/homebrew",
	"/opt/local",
	"/private/etc",
	"/private/var/db/timezone",
	// /bin/sh is a trampoline that reads which shell to run from here.
	"/private/var/select",
	"/Library/Apple",
	"/Library/Frameworks",
	"/Library/Developer/CommandLineTools",
	// The dyld shared cache on macOS 13 and later.
	"/System/Volumes/Preboot/Cryptexes",
}

// systemFiles are single files every profile can read.
var systemFiles = []string{
	// xcode-select's choice, which xcrun and the /usr/bin shims read.
	"/private/var/db/xcode_select_link",
	// CFPreferences falls back to reading the global domain directly when
	// cfprefsd (not reachable) does not answer: locale and number formats.
	// The rest of /Library/Preferences is not readable: it holds other
	// programs' settings, some of them a site's secrets.
	"/Library/Preferences/.GlobalPreferences.plist",
}

// pkgPrefixes are the prefixes whose state and configuration are not
// readable although the prefix is: /usr/local (Intel Homebrew and manual
// installs, inside the /usr root), /opt/homebrew and MacPorts' /opt/local.
var pkgPrefixes = []string{"/usr/local", "/opt/homebrew", "/opt/local"}

// pkgStateDirs are denied under each prefix: var holds services' data
// (PostgreSQL, MySQL, Redis, logs), etc their configuration, which can
// hold passwords and TLS private keys.
var pkgStateDirs = []string{"var", "etc"}

// pkgReadable are the parts of a prefix's etc that programs read to work
// at all, read again after the denial: TLS roots (OpenSSL's cert.pem is a
// link into ca-certificates), OpenSSL's own configuration, git's system
// config (Homebrew's git dies on a config it may not read) and fontconfig.
// OpenSSL's private/ directory stays denied.
var pkgReadable = []struct {
	path string
	dir  bool
}{
	{"etc/ca-certificates", true},
	{"etc/openssl@3/cert.pem", false},
	{"etc/openssl@3/certs", true},
	{"etc/openssl@3/openssl.cnf", false},
	{"etc/openssl@3/ct_log_list.cnf", false},
	{"etc/openssl@1.1/cert.pem", false},
	{"etc/openssl@1.1/certs", true},
	{"etc/openssl@1.1/openssl.cnf", false},
	{"etc/openssl/cert.pem", false},
	{"etc/openssl/certs", true},
	{"etc/openssl/openssl.cnf", false},
	{"etc/gitconfig", false},
	{"etc/fonts", true},
}

// trustServices are the Mach services through which Security.framework
// verifies a certificate chain: Go's crypto/x509 on macOS, curl, gh,
// terraform and URLSession all call SecTrustEvaluateWithError. trustd
// fetches OCSP responses, CRLs and missing intermediates itself, from its
// own process and outside the sandbox's proxy.
var trustServices = []string{
	"com.apple.trustd",
	"com.apple.trustd.agent",
	"com.apple.SecurityServer",
	"com.apple.ocspd",
}

// trustFiles are what Security.framework reads in the caller's process
// while it verifies: the system keychain's roots and admin trust settings,
// and the MDS database that locates the keychain modules.
var trustFiles = []struct {
	path string
	dir  bool
}{
	{"/Library/Keychains/System.keychain", false},
	{"/Library/Security/Trust Settings", true},
	{"/private/var/db/mds/system", true},
}

// systemRules are the reads every profile grants outside base.sbpl, and
// the package-manager state denied again within them. Their order matters:
// the denial of a prefix's state comes after the root that includes it and
// before what TLS needs from it.
func systemRules(opts Options, tag string, rule func(...node), comment func(string)) {
	comment("The system roots, read-only.")
	for _, r := range systemRoots {
		rule(sym("allow"), sym("file-read*"), list(sym("subpath"), str(r)))
	}
	for _, f := range systemFiles {
		rule(sym("allow"), sym("file-read*"), list(sym("literal"), str(f)))
	}
	if opts.DeveloperDir != "" {
		comment("The developer directory xcode-select points at, and its bundle's shared frameworks.")
		for _, d := range developerRoots(opts.DeveloperDir) {
			rule(sym("allow"), sym("file-read*"), list(sym("subpath"), str(d)))
		}
	}
	comment("Package managers' state and configuration: not listed or read, only stat'ed (so that paths through them resolve).")
	for _, pre := range pkgPrefixes {
		for _, d := range pkgStateDirs {
			rule(sym("deny"), sym("file-read-data"), sym("file-read-xattr"),
				list(sym("subpath"), str(pre+"/"+d)), withMessage(tag))
		}
	}
	comment("What TLS, git and fonts need from them.")
	for _, pre := range pkgPrefixes {
		for _, r := range pkgReadable {
			rule(sym("allow"), sym("file-read*"), pathFilter(pre+"/"+r.path, r.dir))
		}
	}
	if opts.ProxyPort != 0 {
		comment("TLS verification through Security.framework (trustd fetches OCSP and CRLs outside the proxy).")
		names := []node{sym("allow"), sym("mach-lookup")}
		for _, s := range trustServices {
			names = append(names, list(sym("global-name"), str(s)))
		}
		rule(names...)
		for _, f := range trustFiles {
			rule(sym("allow"), sym("file-read*"), pathFilter(f.path, f.dir))
		}
	}
	if len(opts.Terminals) > 0 {
		comment("The terminals the command inherits: isatty, raw mode and window size (ioctl), reads and writes.")
		for _, t := range opts.Terminals {
			rule(sym("allow"), sym("file-read-data"), sym("file-write-data"), sym("file-ioctl"), list(sym("literal"), str(t)))
		}
	}
}

func pathFilter(p string, dir bool) node {
	if dir {
		return list(sym("subpath"), str(p))
	}
	return list(sym("literal"), str(p))
}

// developerRoots returns the readable roots for a developer directory:
// the directory itself and, when it is an app bundle's Contents/Developer,
// the bundle's Contents/SharedFrameworks, which its tools link against.
func developerRoots(dev string) []string {
	out := []string{dev}
	if bundle, ok := strings.CutSuffix(dev, "/Contents/Developer"); ok && strings.HasSuffix(bundle, ".app") {
		out = append(out, filepath.Join(bundle, "Contents", "SharedFrameworks"))
	}
	return out
}

// systemAncestorRoots lists the roots whose parent directories need stat:
// the system roots and files and the developer directory's roots.
func systemAncestorRoots(opts Options) []string {
	out := append(append([]string{}, systemRoots...), systemFiles...)
	if opts.DeveloperDir != "" {
		out = append(out, developerRoots(opts.DeveloperDir)...)
	}
	if opts.ProxyPort != 0 {
		for _, f := range trustFiles {
			out = append(out, f.path)
		}
	}
	return out
}

// validTerminal reports whether t names a terminal device Render may
// allow: /dev/ttysNNN, /dev/ttyNNN style names, nothing else.
func validTerminal(t string) bool {
	rest, ok := strings.CutPrefix(t, "/dev/tty")
	if !ok || rest == "" {
		return false
	}
	rest = strings.TrimPrefix(rest, "s")
	if rest == "" {
		return false
	}
	for i := 0; i < len(rest); i++ {
		if rest[i] < '0' || rest[i] > '9' {
			return false
		}
	}
	return true
}
