package wrap

import (
	"fmt"
	"strings"
)

// context is the number of unchanged lines a hunk shows around a change.
const context = 3

// Diff is a unified diff from p.Old to p.New, the file called name in its
// header; empty when nothing changes. It is built from the edits
// themselves, so it shows exactly the lines they touch.
func (p *Plan) Diff(name string) string {
	if !p.Changed() {
		return ""
	}
	old, nw := splitLines(p.Old), splitLines(p.New)
	// Each edit's line range in old and, shifted by the edits before
	// it, in new.
	type span struct{ o0, o1, n0, n1 int }
	var spans []span
	shift := 0
	for _, e := range p.edits {
		o0, o1 := lineOf(p.Old, e.start), lineOf(p.Old, e.end)+1
		n1 := o1 + shift + strings.Count(e.text, "\n") - strings.Count(string(p.Old[e.start:e.end]), "\n")
		if k := len(spans) - 1; k >= 0 && o0 <= spans[k].o1 {
			spans[k].o1, spans[k].n1 = o1, n1
		} else {
			spans = append(spans, span{o0, o1, o0 + shift, n1})
		}
		shift = n1 - o1
	}
	var b strings.Builder
	fmt.Fprintf(&b, "--- %s\n+++ %s%s\n", name, name, " (wrapped)")
	for i := 0; i < len(spans); {
		// Join spans whose context would touch.
		j := i
		for j+1 < len(spans) && spans[j+1].o0-spans[j].o1 <= 2*context {
			j++
		}
		first, last := spans[i], spans[j]
		a0 := max(first.o0-context, 0)
		a1 := min(last.o1+context, len(old))
		b0, b1 := a0+(first.n0-first.o0), a1+(last.n1-last.o1)
		fmt.Fprintf(&b, "@@ -%d,%d +%d,%d @@\n", a0+1, a1-a0, b0+1, b1-b0)
		at := a0
		for k := i; k <= j; k++ {
			s := spans[k]
			writeLines(&b, " ", old[at:s.o0])
			writeLines(&b, "-", old[s.o0:s.o1])
			writeLines(&b, "+", nw[s.n0:s.n1])
			at = s.o1
		}
		writeLines(&b, " ", old[at:a1])
		i = j + 1
	}
	return b.String()
}

func splitLines(b []byte) []string {
	s := strings.SplitAfter(string(b), "\n")
	if len(s) > 0 && s[len(s)-1] == "" {
		s = s[:len(s)-1]
	}
	return s
}

// lineOf is the 0-based line that holds byte offset i (an offset at the
// end of the text belongs to the last line).
func lineOf(b []byte, i int) int {
	n := strings.Count(string(b[:i]), "\n")
	if i == len(b) && i > 0 && b[i-1] == '\n' {
		n--
	}
	return n
}

func writeLines(b *strings.Builder, prefix string, lines []string) {
	for _, l := range lines {
		b.WriteString(prefix)
		b.WriteString(l)
		if !strings.HasSuffix(l, "\n") {
			b.WriteString("\n\\ No newline at end of file\n")
		}
	}
}
