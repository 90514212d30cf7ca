package filter

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

const (
	docsPath  = "../docs/seccomp.md"
	docsBegin = "<!-- BEGIN GENERATED from filter.Rules() by `go test ./filter -run TestDocs -update`; do not edit by hand -->"
	docsEnd   = "<!-- END GENERATED -->"
)

// renderRules is the generated section of docs/seccomp.md: one row per rule,
// read from Rules() and the syscall tables.
func renderRules() string {
	var b strings.Builder
	b.WriteString("| syscall | nr x86_64 / aarch64 | when | result | why |\n")
	b.WriteString("|---|---|---|---|---|\n")
	for _, r := range Rules() {
		nrs := make([]string, 0, 2)
		for _, a := range []Arch{ArchX86_64, ArchAArch64} {
			if n, ok := archInfos[a].sysnum.lookup(r.Syscall); ok && r.appliesTo(a) {
				nrs = append(nrs, fmt.Sprint(n))
			} else {
				nrs = append(nrs, "—")
			}
		}
		when := "always"
		switch r.Cond {
		case AnyBitSet:
			when = fmt.Sprintf("low 32 bits of arg %d have any of %s", r.Arg, strings.Join(r.Values, ", "))
		case OneOf:
			when = fmt.Sprintf("low 32 bits of arg %d are one of %s", r.Arg, strings.Join(r.Values, ", "))
		case NoneOf:
			when = fmt.Sprintf("low 32 bits of arg %d are none of %s", r.Arg, strings.Join(r.Values, ", "))
		}
		if r.Net != AnyNet {
			when += " (" + r.Net.String() + " only)"
		}
		if r.SetID {
			when += " (with --map-owner)"
		}
		result := r.Errno
		if r.Ptrace {
			result += " (allowed with --ptrace)"
		}
		fmt.Fprintf(&b, "| `%s` | %s | %s | %s | %s |\n", r.Syscall, strings.Join(nrs, " / "), when, result, r.Why)
	}
	return b.String()
}

// TestDocs fails when docs/seccomp.md and the rule table disagree; -update
// rewrites the generated section and keeps the prose around it.
func TestDocs(t *testing.T) {
	path := filepath.FromSlash(docsPath)
	doc, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	s := string(doc)
	i, j := strings.Index(s, docsBegin), strings.Index(s, docsEnd)
	if i < 0 || j < i {
		t.Fatalf("%s: markers %q and %q not found in order", path, docsBegin, docsEnd)
	}
	have := strings.TrimPrefix(s[i+len(docsBegin):j], "\n")
	want := renderRules()
	if have == want {
		return
	}
	if *update {
		s = s[:i+len(docsBegin)] + "\n" + want + s[j:]
		if err := os.WriteFile(path, []byte(s), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	hl, wl := strings.Split(have, "\n"), strings.Split(want, "\n")
	for k := 0; k < len(hl) || k < len(wl); k++ {
		var h, w string
		if k < len(hl) {
			h = hl[k]
		}
		if k < len(wl) {
			w = wl[k]
		}
		if h != w {
			t.Fatalf("%s disagrees with Rules() (go test ./filter -run TestDocs -update), first at table line %d:\n doc:   %s\n table: %s", path, k+1, h, w)
		}
	}
}
