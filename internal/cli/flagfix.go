package cli

import (
	"strings"

	"github.com/spf13/pflag"
)

// parseFix is the fix for a flag set that refused args: the nearest
// flag to the first long flag fs does not know ("--alow-host": "use
// --allow-host"), found from args themselves rather than from pflag's
// message; otherwise the subcommand's --help.
func parseFix(fs *pflag.FlagSet, args []string, sub string) string {
	for _, a := range args {
		if a == "--" || !strings.HasPrefix(a, "--") {
			if a == "--" || !strings.HasPrefix(a, "-") {
				break // the command begins: its flags are its own
			}
			continue
		}
		name, _, _ := strings.Cut(strings.TrimPrefix(a, "--"), "=")
		if fs.Lookup(name) != nil {
			continue
		}
		if near := nearestFlag(fs, name); near != "" {
			return "use --" + near + " (sandbox-run " + sub + " --help lists every flag)"
		}
		break
	}
	return "see sandbox-run " + sub + " --help"
}

// nearestFlag is the flag of fs within two edits of name, the nearest
// first; "" when none is.
func nearestFlag(fs *pflag.FlagSet, name string) string {
	best, bestD := "", 3
	fs.VisitAll(func(f *pflag.Flag) {
		if f.Hidden {
			return
		}
		if d := editDistance(name, f.Name); d < bestD {
			best, bestD = f.Name, d
		}
	})
	return best
}

// editDistance is the Levenshtein distance between a and b.
func editDistance(a, b string) int {
	prev := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur := make([]int, len(b)+1)
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev = cur
	}
	return prev[len(b)]
}
