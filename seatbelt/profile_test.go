package seatbelt

import (
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sandbox-run/sandbox-run/policy"
)

var update = flag.Bool("update", false, "rewrite testdata/*.golden from the current output")

const testTag = "sandbox-run-0123456789abcdef"

// goldenCases are representative policies; each has testdata/NAME.sbpl.golden.
var goldenCases = []struct {
	name string
	p    policy.Policy
	opts Options
}{
	{
		name: "minimal",
		p:    policy.Policy{Workdir: "/Users/alice/job"},
		opts: Options{Tag: testTag, TmpDir: "/private/var/folders/ab/cd/T/sandbox-run-tmp-1"},
	},
	{
		name: "full",
		p: policy.Policy{
			Workdir:    "/Users/alice/job",
			Write:      []string{"/tmp/cache", "/Users/alice/out/"},
			Read:       []string{"/Users/alice/.config/tool.json", "/etc/hosts", "/var/db/certs"},
			Protect:    []string{".envrc", "config/secrets", "/Users/alice/job/deploy.key"},
			AllowHosts: []string{"example.com", "*.pypi.org"},
			LLMSocket:  "/Users/alice/.node/llm.sock",
			Ptrace:     true,
		},
		opts: Options{Tag: testTag, TmpDir: "/private/var/folders/ab/cd/T/sandbox-run-tmp-2", ProxyPort: 49152, LLMPort: 49153},
	},
	{
		name: "mac-typical",
		p:    macTypical.p,
		opts: macTypical.opts,
	},
	{
		name: "hostile-names",
		p: policy.Policy{
			Workdir: `/Users/alice/job "x") (allow default) ; (`,
			Write:   []string{`/Users/alice/back\slash\"`, "/Users/alice/ünïcödé 名前"},
			Read:    []string{`/Users/alice/"))(allow network*)(("`},
		},
		opts: Options{Tag: testTag, ProxyPort: 8080},
	},
}

func TestGolden(t *testing.T) {
	for _, tc := range goldenCases {
		t.Run(tc.name, func(t *testing.T) {
			prof, err := Render(tc.p, tc.opts)
			if err != nil {
				t.Fatal(err)
			}
			path := filepath.Join("testdata", tc.name+".sbpl.golden")
			if *update {
				if err := os.WriteFile(path, []byte(prof.String()), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			want, err := os.ReadFile(path)
			if err != nil {
				t.Fatalf("%v (run go test ./seatbelt/ -update to create it)", err)
			}
			if got := prof.String(); got != string(want) {
				t.Errorf("profile differs from %s (refresh with -update and read the diff):\n%s", path, lineDiff(string(want), got))
			}
			checkReadsBack(t, tc.p, tc.opts, prof)
		})
	}
}

// lineDiff shows the first differing lines of want and got.
func lineDiff(want, got string) string {
	w, g := strings.Split(want, "\n"), strings.Split(got, "\n")
	for i := 0; i < len(w) || i < len(g); i++ {
		var a, b string
		if i < len(w) {
			a = w[i]
		}
		if i < len(g) {
			b = g[i]
		}
		if a != b {
			return fmt.Sprintf("line %d:\n- %s\n+ %s", i+1, a, b)
		}
	}
	return "(no line differs)"
}

// checkReadsBack is the oracle shared by the golden tests and the fuzz
// target: the profile text, read with TinyScheme's rules, is exactly
// (version 1), the tagged default deny, the forms of base.sbpl and the
// forms render built, in that order. Nothing a path holds can add, remove
// or reshape an expression.
func checkReadsBack(t testing.TB, p policy.Policy, opts Options, prof Profile) {
	t.Helper()
	forms, err := render(GrantsOf(p), opts)
	if err != nil {
		t.Fatalf("render failed where Render succeeded: %v", err)
	}
	got, err := readSBPL(prof.String())
	if err != nil {
		t.Fatalf("profile does not read back: %v\n%s", err, prof)
	}
	baseForms, err := readSBPL(base)
	if err != nil {
		t.Fatalf("base.sbpl does not read: %v", err)
	}
	want := []rnode{toR(list(sym("version"), sym("1"))), toR(header(opts.Tag))}
	want = append(want, baseForms...)
	for _, f := range forms {
		if f.comment == "" {
			want = append(want, toR(f.node))
		}
	}
	if len(got) != len(want) {
		t.Fatalf("profile reads back as %d expressions, want %d", len(got), len(want))
	}
	for i := range want {
		if !equalR(got[i], want[i]) {
			t.Fatalf("expression %d reads back as\n  %s\nwant\n  %s", i, got[i], want[i])
		}
		if h := got[i].list; len(h) == 0 || (h[0].sym != "version" && h[0].sym != "allow" && h[0].sym != "deny") {
			t.Fatalf("expression %d is not a rule: %s", i, got[i])
		}
	}
	for _, c := range forms {
		if strings.Contains(c.comment, "\n") {
			t.Fatalf("comment holds a newline: %q", c.comment)
		}
	}
}

func TestBaseReads(t *testing.T) {
	forms, err := readSBPL(base)
	if err != nil {
		t.Fatal(err)
	}
	var walk func(rnode)
	walk = func(n rnode) {
		if n.isList {
			for _, c := range n.list {
				walk(c)
			}
			return
		}
		if n.str == nil && !validSymbol(n.sym) {
			t.Errorf("base.sbpl: symbol %q", n.sym)
		}
	}
	for _, f := range forms {
		walk(f)
		if f.list[0].sym != "allow" {
			t.Errorf("base.sbpl holds a rule that is not an allow: %s", f)
		}
	}
}

func TestRenderProperties(t *testing.T) {
	p := policy.Policy{Workdir: "/Users/alice/job", Write: []string{"/tmp/w"}, Protect: []string{"a/b/c"}}
	prof, err := Render(p, Options{Tag: testTag, ProxyPort: 3128})
	if err != nil {
		t.Fatal(err)
	}
	text := withoutComments(prof.String())
	for _, want := range []string{
		`(deny default (with message "` + testTag + `"))`,
		`(allow network-outbound (remote tcp "localhost:3128"))`,
		// alias resolved, never the /tmp spelling
		`(allow file-read* (subpath "/private/tmp/w"))`,
		// protected, in both writable roots, in any case, last
		`(deny file-write* (regex "^/private/tmp/w(/.*)?/\\.[gG][iI][tT]/((`,
		`(deny file-write* (regex "^/Users/alice/job/[aA]/[bB]/[cC](/.*)?$") (with message "` + testTag + `"))`,
		// the .git entry itself: no gitfile, no rename, no link
		`(deny file-write* (regex "^/Users/alice/job(/.*)?/\\.[gG][iI][tT]$") (with message "` + testTag + `"))`,
		// the directories leading to a protected path
		`(deny file-write-unlink (regex "^/Users/alice/job/[aA]/[bB]$") (with message "` + testTag + `"))`,
		`(deny file-write-unlink (regex "^/Users/alice/job/[aA]$") (with message "` + testTag + `"))`,
		`(deny file-write-create (require-all (regex "^/Users/alice/job/[aA]$") (vnode-type SYMLINK)) (with message "` + testTag + `"))`,
		// package managers' state
		`(deny file-read-data file-read-xattr (subpath "/opt/homebrew/var") (with message "` + testTag + `"))`,
	} {
		if !strings.Contains(text, want) {
			t.Errorf("profile lacks %s", want)
		}
	}
	for _, bad := range []string{`"/tmp/`, "network*", "(remote ip", "(remote udp", "unix-socket", "network-bind", "network-inbound", "(allow default", "(allow file-write* (subpath \"/\"))"} {
		if strings.Contains(text, bad) {
			t.Errorf("profile holds %s", bad)
		}
	}
	// The protected denies come after every allow.
	lastAllow := strings.LastIndex(text, "(allow ")
	firstProtect := strings.Index(text, "(deny file-write")
	if firstProtect < lastAllow {
		t.Errorf("a protected-path deny precedes an allow; Seatbelt applies the last match")
	}
	if prof.Tag() != testTag || len(prof.Digest()) != 64 {
		t.Errorf("Tag %q Digest %q", prof.Tag(), prof.Digest())
	}

	// No egress without a port.
	prof, err = Render(policy.Policy{Workdir: "/w"}, Options{Tag: testTag})
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(withoutComments(prof.String()), "network-outbound") {
		t.Errorf("a profile without ports allows network-outbound")
	}
}

func TestRenderRefuses(t *testing.T) {
	cases := []struct {
		name string
		p    policy.Policy
		opts Options
		want error
	}{
		{"no workdir", policy.Policy{}, Options{Tag: testTag}, policy.ErrInvalid},
		{"relative", policy.Policy{Workdir: "job"}, Options{Tag: testTag}, policy.ErrInvalid},
		{"nul", policy.Policy{Workdir: "/a\x00b"}, Options{Tag: testTag}, policy.ErrInvalid},
		// Control characters in paths are refused by policy.Validate
		// before quoting is reached; quote's own refusal of them is
		// tested in TestQuote and FuzzQuote.
		{"newline", policy.Policy{Workdir: "/a\nb"}, Options{Tag: testTag}, policy.ErrInvalid},
		{"escape", policy.Policy{Workdir: "/a", Read: []string{"/b\x1b[0m"}}, Options{Tag: testTag}, policy.ErrInvalid},
		{"del", policy.Policy{Workdir: "/a", Write: []string{"/b\x7f"}}, Options{Tag: testTag}, policy.ErrInvalid},
		{"invalid utf-8", policy.Policy{Workdir: "/a\xff\"b"}, Options{Tag: testTag}, ErrUnsafeString},
		{"too long", policy.Policy{Workdir: "/" + strings.Repeat("a", MaxStringLen)}, Options{Tag: testTag}, ErrUnsafeString},
		{"protect newline", policy.Policy{Workdir: "/a", Protect: []string{"x\ny"}}, Options{Tag: testTag}, policy.ErrInvalid},
		{"no tag", policy.Policy{Workdir: "/a"}, Options{}, ErrInvalidOptions},
		{"tag quote", policy.Policy{Workdir: "/a"}, Options{Tag: `abcdefgh")(allow default`}, ErrInvalidOptions},
		{"port", policy.Policy{Workdir: "/a"}, Options{Tag: testTag, ProxyPort: 70000}, ErrInvalidOptions},
		{"relative tmp", policy.Policy{Workdir: "/a"}, Options{Tag: testTag, TmpDir: "tmp"}, ErrInvalidOptions},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Render(tc.p, tc.opts)
			if !errors.Is(err, tc.want) {
				t.Fatalf("Render: %v, want an error wrapping %v", err, tc.want)
			}
			if errors.Is(tc.want, ErrUnsafeString) {
				var ue *UnsafeStringError
				if !errors.As(err, &ue) || ue.Field == "" || ue.Reason == "" {
					t.Errorf("want an *UnsafeStringError naming field and reason, got %#v", err)
				}
			}
			if strings.Contains(err.Error(), "BUG(") {
				t.Errorf("a user error is marked as a bug: %v", err)
			}
		})
	}
}

func TestCanonical(t *testing.T) {
	for in, want := range map[string]string{
		"/tmp":             "/private/tmp",
		"/tmp/x/../y":      "/private/tmp/y",
		"/var/folders/a":   "/private/var/folders/a",
		"/etc/hosts":       "/private/etc/hosts",
		"/etcetera":        "/etcetera",
		"/private/tmp":     "/private/tmp",
		"/Users/alice/":    "/Users/alice",
		"/variable/x":      "/variable/x",
		"/tmpfoo":          "/tmpfoo",
		"/System/Volumes/": "/System/Volumes",
	} {
		if got := Canonical(in); got != want {
			t.Errorf("Canonical(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestQuote(t *testing.T) {
	for in, want := range map[string]string{
		`plain`:        `"plain"`,
		`a"b`:          `"a\"b"`,
		`a\b`:          `"a\\b"`,
		`\"`:           `"\\\""`,
		`ünï 名`:        `"ünï 名"`,
		`(allow ;) #"`: `"(allow ;) #\""`,
	} {
		if got := quote(in); got != want {
			t.Errorf("quote(%q) = %s, want %s", in, got, want)
		}
	}
	defer func() {
		if r := recover(); r == nil || !strings.HasPrefix(fmt.Sprint(r), "BUG(sandbox-run)") {
			t.Errorf("quote of an unchecked string: recover() = %v", r)
		}
	}()
	quote("a\nb")
}

func TestNewTag(t *testing.T) {
	a, b := NewTag(), NewTag()
	if a == b || !validTag(a) || !validTag(b) {
		t.Errorf("NewTag: %q, %q", a, b)
	}
}

func ExampleRender() {
	p := policy.Policy{Workdir: "/Users/alice/job", AllowHosts: []string{"example.com"}}
	prof, err := Render(p, Options{Tag: "sandbox-run-example1", ProxyPort: 49152})
	if err != nil {
		fmt.Println(err)
		return
	}
	for _, line := range strings.Split(prof.String(), "\n") {
		if strings.HasPrefix(line, "(allow network") || strings.HasPrefix(line, `(allow file-read* (subpath "/Users`) {
			fmt.Println(line)
		}
	}
	// Output:
	// (allow file-read* (subpath "/Users/alice/job"))
	// (allow network-outbound (remote tcp "localhost:49152"))
}

// withoutComments drops the ';' comment lines of a profile.
func withoutComments(text string) string {
	var b strings.Builder
	for _, line := range strings.Split(text, "\n") {
		if !strings.HasPrefix(strings.TrimSpace(line), ";") {
			b.WriteString(line)
			b.WriteByte('\n')
		}
	}
	return b.String()
}

// TestRenderGrants: a plan's grants render as the policy they came from
// does, and a grant that is no absolute path (which Render's policy
// check would have caught) or cannot be written safely is refused.
func TestRenderGrants(t *testing.T) {
	p := policy.Policy{Workdir: "/w", Write: []string{"/out"}, Read: []string{"/ref"}, Ptrace: true}
	opts := Options{Tag: testTag, ProxyPort: 8080}
	a, err := Render(p, opts)
	if err != nil {
		t.Fatal(err)
	}
	b, err := RenderGrants(GrantsOf(p), opts)
	if err != nil {
		t.Fatal(err)
	}
	if a.String() != b.String() {
		t.Error("RenderGrants(GrantsOf(p)) differs from Render(p)")
	}
	for _, tc := range []struct {
		name string
		g    Grants
		want error
	}{
		{"relative writable", Grants{Writable: []string{"w"}}, ErrInvalidOptions},
		{"empty read", Grants{Writable: []string{"/w"}, Read: []string{""}}, ErrInvalidOptions},
		{"relative protected", Grants{Writable: []string{"/w"}, Protected: []string{".bashrc"}}, ErrInvalidOptions},
		{"unsafe protected", Grants{Writable: []string{"/w"}, Protected: []string{"/w/\xff\""}}, ErrUnsafeString},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := RenderGrants(tc.g, opts); !errors.Is(err, tc.want) {
				t.Fatalf("RenderGrants: %v, want an error wrapping %v", err, tc.want)
			}
		})
	}
}
