package seatbelt

import (
	"regexp"
	"strings"
	"testing"

	"github.com/sandbox-run/sandbox-run/policy"
)

// macTypical is the policy the desk review of issue 22 read: a workdir
// under /Users, two --read dirs, --allow-host, an LLM socket; with a
// versioned Xcode selected and a terminal inherited.
var macTypical = struct {
	p    policy.Policy
	opts Options
}{
	p: policy.Policy{
		Workdir:    "/Users/alice/job",
		Write:      []string{"/Users/alice/repo/.git"},
		Read:       []string{"/Users/alice/datasets", "/Users/alice/.config/tool"},
		AllowHosts: []string{"api.github.com"},
		LLMSocket:  "/Users/alice/.node/llm.sock",
	},
	opts: Options{
		Tag: testTag, TmpDir: "/private/var/folders/ab/cd/T/sandbox-run-tmp-3", ProxyPort: 49152, LLMPort: 49153,
		DeveloperDir: "/Applications/Xcode_16.2.app/Contents/Developer",
		Terminals:    []string{"/dev/ttys003"},
	},
}

const job = "/Users/alice/job"

// TestHolesStayClosed: every hole of issue 22 item 1, and every breakage of
// item 2, as an access the profile must deny or allow. Each deny has a
// control in the same table that the profile allows (a neighbouring write
// or read), so that a profile that denied everything would fail too.
func TestHolesStayClosed(t *testing.T) {
	prof, err := Render(macTypical.p, macTypical.opts)
	if err != nil {
		t.Fatal(err)
	}
	w := func(op, path, vnode string) access { return access{op: op, path: path, vnode: vnode} }
	const file, dir, link = "REGULAR-FILE", "DIRECTORY", "SYMLINK"
	for _, tc := range []struct {
		why   string
		a     access
		allow bool
	}{
		// Item 1: git metadata, at any depth, in any case, as a gitfile.
		{"gitfile created", w("file-write-create", job+"/.git", file), false},
		{"nested gitfile rewritten", w("file-write-data", job+"/vendor/lib/.git", file), false},
		{"repository renamed away", w("file-write-unlink", job+"/.git", dir), false},
		{"prepared directory renamed into .git", w("file-write-create", job+"/sub/.git", dir), false},
		{".git made a link", w("file-write-create", job+"/.Git", link), false},
		{"case variant hooks", w("file-write-create", job+"/.GIT/hooks/pre-commit", file), false},
		{"case variant config", w("file-write-data", job+"/.git/CONFIG", file), false},
		{"nested config depth 3", w("file-write-data", job+"/a/b/c/.git/config", file), false},
		{"config.worktree", w("file-write-create", job+"/.git/config.worktree", file), false},
		{"commondir", w("file-write-create", job+"/.git/commondir", file), false},
		{"info/attributes", w("file-write-create", job+"/.git/info/attributes", file), false},
		{"info swapped", w("file-write-unlink", job+"/.git/info", dir), false},
		{"submodule config", w("file-write-data", job+"/.git/modules/sub/config", file), false},
		{"nested submodule hooks", w("file-write-create", job+"/.git/modules/libs/foo/modules/bar/hooks/post-checkout", file), false},
		{"submodule git dir renamed in", w("file-write-create", job+"/.git/modules/sub", dir), false},
		{"worktree config", w("file-write-data", job+"/.git/worktrees/w1/config.worktree", file), false},
		{"worktree commondir", w("file-write-data", job+"/.git/worktrees/w1/commondir", file), false},
		{"worktree directory renamed in", w("file-write-create", job+"/.git/worktrees/w2", dir), false},
		{"--write of a main .git: config", w("file-write-data", "/Users/alice/repo/.git/config", file), false},
		{"--write of a main .git: hooks", w("file-write-create", "/Users/alice/repo/.git/hooks/pre-push", file), false},
		{"--write of a main .git: worktree config", w("file-write-data", "/Users/alice/repo/.git/worktrees/x/config.worktree", file), false},
		{"protected name, case variant", w("file-write-create", job+"/.MCP.json", file), false},
		{"protected dir, case variant", w("file-write-create", job+"/.VSCode/settings.json", file), false},
		{"protected rc, case variant", w("file-write-data", job+"/.BashRC", file), false},
		// Their controls: git's everyday writes, and git in TMPDIR.
		{"control: source file", w("file-write-data", job+"/src/main.go", file), true},
		{"control: object", w("file-write-create", job+"/.git/objects/ab/cdef", file), true},
		{"control: object dir", w("file-write-create", job+"/.git/objects/ab", dir), true},
		{"control: branch", w("file-write-create", job+"/.git/refs/heads/feature", file), true},
		{"control: index", w("file-write-data", job+"/.git/index", file), true},
		{"control: HEAD", w("file-write-data", job+"/.git/HEAD", file), true},
		{"control: submodule objects", w("file-write-create", job+"/.git/modules/sub/objects/ab", dir), true},
		{"control: worktree HEAD", w("file-write-data", job+"/.git/worktrees/w1/HEAD", file), true},
		{"control: --write .git objects", w("file-write-create", "/Users/alice/repo/.git/objects/ab/cd", file), true},
		{"control: git init in TMPDIR", w("file-write-create", macTypical.opts.TmpDir+"/r/.git/config", file), true},
		{"control: a file named git", w("file-write-create", job+"/git", file), true},

		// Item 1: broad reads.
		{"homebrew var", w("file-read-data", "/opt/homebrew/var/postgresql@16/pg_hba.conf", file), false},
		{"homebrew var listed", w("file-read-data", "/opt/homebrew/var", dir), false},
		{"homebrew etc", w("file-read-data", "/opt/homebrew/etc/redis.conf", file), false},
		{"intel homebrew var", w("file-read-data", "/usr/local/var/mysql/ibdata1", file), false},
		{"intel homebrew etc", w("file-read-data", "/usr/local/etc/nginx/server.key", file), false},
		{"macports etc", w("file-read-data", "/opt/local/etc/postgresql/pg_hba.conf", file), false},
		{"openssl private", w("file-read-data", "/opt/homebrew/etc/openssl@3/private/key.pem", file), false},
		{"data volume", w("file-read-data", "/System/Volumes/Data/Users/alice/.ssh/id_ed25519", file), false},
		{"control: homebrew program", w("file-read-data", "/opt/homebrew/bin/node", file), true},
		{"control: homebrew var stat", w("file-read-metadata", "/opt/homebrew/var", dir), true},
		{"control: TLS roots", w("file-read-data", "/opt/homebrew/etc/ca-certificates/cert.pem", file), true},
		{"control: openssl cert.pem", w("file-read-data", "/opt/homebrew/etc/openssl@3/cert.pem", file), true},
		{"control: intel openssl cert.pem", w("file-read-data", "/usr/local/etc/openssl@3/cert.pem", file), true},
		{"control: homebrew git system config", w("file-read-data", "/opt/homebrew/etc/gitconfig", file), true},
		{"control: /usr/lib", w("file-read-data", "/usr/lib/libSystem.B.dylib", file), true},

		// Item 1: UDP to the proxy's port.
		{"udp to the proxy port", access{op: "network-outbound", remote: "udp localhost:49152"}, false},
		{"udp to the llm port", access{op: "network-outbound", remote: "udp localhost:49153"}, false},
		{"control: tcp to the proxy port", access{op: "network-outbound", remote: "tcp localhost:49152"}, true},
		{"control: tcp to the llm port", access{op: "network-outbound", remote: "tcp localhost:49153"}, true},
		{"tcp to another port", access{op: "network-outbound", remote: "tcp localhost:22"}, false},

		// Item 2: metadata of the system roots' parents.
		{"stat /opt", w("file-read-metadata", "/opt", dir), true},
		{"stat /Library", w("file-read-metadata", "/Library", dir), true},
		{"stat /Library/Developer", w("file-read-metadata", "/Library/Developer", dir), true},
		{"stat /Applications", w("file-read-metadata", "/Applications", dir), true},
		{"stat the Xcode bundle", w("file-read-metadata", "/Applications/Xcode_16.2.app", dir), true},
		{"stat /private/var/db", w("file-read-metadata", "/private/var/db", dir), true},
		{"but not list /opt", w("file-read-data", "/opt", dir), false},
		{"nor list /Applications", w("file-read-data", "/Applications", dir), false},
		// Item 2: the selected Xcode and its shared frameworks.
		{"xcode developer dir", w("file-read-data", "/Applications/Xcode_16.2.app/Contents/Developer/usr/bin/xcodebuild", file), true},
		{"xcode shared frameworks", w("file-read-data", "/Applications/Xcode_16.2.app/Contents/SharedFrameworks/DVTFoundation.framework/DVTFoundation", file), true},
		{"another Xcode", w("file-read-data", "/Applications/Xcode.app/Contents/Developer/usr/bin/xcodebuild", file), false},
		// Item 2: TLS verification through trustd with a proxy.
		{"trustd", access{op: "mach-lookup", name: "com.apple.trustd.agent"}, true},
		{"SecurityServer", access{op: "mach-lookup", name: "com.apple.SecurityServer"}, true},
		{"system keychain", w("file-read-data", "/Library/Keychains/System.keychain", file), true},
		{"still no DNS", access{op: "mach-lookup", name: "com.apple.dnssd.service"}, false},
		{"still no cfprefsd", access{op: "mach-lookup", name: "com.apple.cfprefsd.daemon"}, false},
		// Item 2: the inherited terminal, and no other.
		{"terminal ioctl", w("file-ioctl", "/dev/ttys003", ""), true},
		{"another terminal", w("file-ioctl", "/dev/ttys004", ""), false},
		{"another terminal read", w("file-read-data", "/dev/ttys004", ""), false},
		{"autofs_nowait", w("file-read-data", "/dev/autofs_nowait", ""), true},
		{"global preferences", w("file-read-data", "/Library/Preferences/.GlobalPreferences.plist", file), true},
		{"other preferences", w("file-read-data", "/Library/Preferences/com.apple.loginwindow.plist", file), false},
	} {
		if got, by := decide(t, prof, tc.a); got != tc.allow {
			t.Errorf("%s: %s: allowed=%v, want %v (decided by %s)", tc.why, tc.a, got, tc.allow, by)
		}
	}
}

// TestTrustOnlyWithProxy: without an egress proxy there is nothing to
// verify, and trustd (which reaches the network on its own) stays closed;
// without a terminal, no tty is open to ioctl.
func TestTrustOnlyWithProxy(t *testing.T) {
	prof, err := Render(policy.Policy{Workdir: job}, Options{Tag: testTag})
	if err != nil {
		t.Fatal(err)
	}
	for _, a := range []access{
		{op: "mach-lookup", name: "com.apple.trustd.agent"},
		{op: "file-read-data", path: "/Library/Keychains/System.keychain"},
		{op: "file-ioctl", path: "/dev/ttys003"},
		{op: "network-outbound", remote: "tcp localhost:49152"},
	} {
		if ok, by := decide(t, prof, a); ok {
			t.Errorf("%s allowed without a proxy or terminal (by %s)", a, by)
		}
	}
	if ok, _ := decide(t, prof, access{op: "file-read-data", path: "/usr/bin/true"}); !ok {
		t.Errorf("control: /usr/bin/true not readable")
	}
}

func TestCIRegex(t *testing.T) {
	for in, want := range map[string]string{
		".git":         `\.[gG][iI][tT]`,
		"a+b(c)":       `[aA]\+[bB]\([cC]\)`,
		"ü1":           "ü1",
		"x.y/Z":        `[xX]\.[yY]/[zZ]`,
		`[a]{2}|^$*?\`: `\[[aA]\]\{2\}\|\^\$\*\?\\`,
	} {
		if got := ciRegex(in); got != want {
			t.Errorf("ciRegex(%q) = %q, want %q", in, got, want)
		}
	}
}

// FuzzRegexLiteral: a path written with regexLiteral matches itself and
// nothing longer or shorter; ciRegex also matches its upper- and
// lower-case spellings. (Go's regexp reads POSIX ERE escapes the same way
// for the metacharacters regexLiteral escapes.)
func FuzzRegexLiteral(f *testing.F) {
	for _, s := range []string{"/Users/alice/job", `/a.b*c+d?(e)[f]{g}|h^$\i`, "/ü 名前", ".git", ""} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		if checkString(s) != "" {
			return
		}
		re, err := regexp.Compile("^" + regexLiteral(s) + "$")
		if err != nil {
			t.Fatalf("regexLiteral(%q) does not compile: %v", s, err)
		}
		if !re.MatchString(s) || re.MatchString(s+"x") || (s != "" && re.MatchString(s[:len(s)-1])) {
			t.Fatalf("regexLiteral(%q) = %q does not match exactly itself", s, regexLiteral(s))
		}
		ci := regexp.MustCompile("^" + ciRegex(s) + "$")
		for _, v := range []string{s, strings.ToUpper(s), strings.ToLower(s)} {
			if asciiFold(v) == asciiFold(s) && !ci.MatchString(v) {
				t.Fatalf("ciRegex(%q) does not match %q", s, v)
			}
		}
	})
}

// asciiFold lower-cases ASCII letters only, as ciRegex folds them.
func asciiFold(s string) string {
	b := []byte(s)
	for i, c := range b {
		if c >= 'A' && c <= 'Z' {
			b[i] = c + 'a' - 'A'
		}
	}
	return string(b)
}
