package seatbelt

import (
	"errors"
	"testing"

	"github.com/sandbox-run/sandbox-run/policy"
)

// FuzzRenderPaths proves that no path can inject profile syntax: for any
// workdir, --write, --read and --protect value, Render either refuses with
// policy.ErrInvalid or ErrUnsafeString (and only when some path really is
// unsafe), or writes a profile that reads back, under TinyScheme's string
// rules, as exactly the expressions render built, with the workdir's
// canonical spelling among its strings.
func FuzzRenderPaths(f *testing.F) {
	for _, s := range [][4]string{
		{"/Users/alice/job", "/tmp/x", "/etc/hosts", ".envrc"},
		{`/a "b") (allow default) ; (`, `/c\`, `/d\"`, `e"f`},
		{`/a\\"`, `/"))(allow network*)(("`, `/#"regex"`, `;comment`},
		{"/ü/名前", "/x y", "/'q", "`b`"},
		{"/a\nb", "/c\x00", "/d\xff", "x\x7f"},
		{"/tmp", "/var", "/etc", "/"},
		{"/", "/a/../..", "//x//", "./y"},
	} {
		f.Add(s[0], s[1], s[2], s[3])
	}
	f.Fuzz(func(t *testing.T, workdir, write, read, protect string) {
		p := policy.Policy{Workdir: workdir, Write: []string{write}, Read: []string{read}, Protect: []string{protect}}
		opts := Options{Tag: testTag, TmpDir: "/private/var/folders/zz/T/x", ProxyPort: 3128, LLMPort: 3129}
		prof, err := Render(p, opts)
		if err != nil {
			switch {
			case errors.Is(err, policy.ErrInvalid):
				if p.Validate() == nil {
					t.Fatalf("ErrInvalid for a policy that validates: %v", err)
				}
			case errors.Is(err, ErrUnsafeString):
				var ue *UnsafeStringError
				if !errors.As(err, &ue) || checkString(ue.Value) == "" {
					t.Fatalf("refused a safe string: %v", err)
				}
			default:
				t.Fatalf("unexpected error class: %v", err)
			}
			return
		}
		checkReadsBack(t, p, opts, prof)
		got, _ := readSBPL(prof.String())
		want := Canonical(p.WithDefaults().Workdir)
		if !holdsString(got, want) {
			t.Fatalf("the workdir %q does not read back as the string %q", workdir, want)
		}
	})
}

// FuzzQuote checks the escaping alone: every string checkString accepts
// reads back as itself, as one string expression.
func FuzzQuote(f *testing.F) {
	for _, s := range []string{"", `"`, `\`, `\"`, `"\`, "a b", "(", ")", ";", "#\"", "ü", "\n", "\xff"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		if checkString(s) != "" {
			return
		}
		text := list(sym("allow"), sym("file-read*"), list(sym("subpath"), str(s))).String()
		got, err := readSBPL(text)
		if err != nil {
			t.Fatalf("%s does not read back: %v", text, err)
		}
		want := toR(list(sym("allow"), sym("file-read*"), list(sym("subpath"), str(s))))
		if len(got) != 1 || !equalR(got[0], want) {
			t.Fatalf("%s reads back as %v", text, got)
		}
	})
}

func holdsString(ns []rnode, s string) bool {
	for _, n := range ns {
		if n.str != nil && *n.str == s {
			return true
		}
		if n.isList && holdsString(n.list, s) {
			return true
		}
	}
	return false
}
