package matrix

import (
	"fmt"
	"sort"
	"strings"

	"github.com/sandbox-run/sandbox-run/internal/probe"
)

// Verdicts of one case on this machine.
const (
	Held     = "held"     // the unconfined control reached the canary, the confined attempt did not
	Escaped  = "ESCAPED"  // the confined attempt reached its canary
	Untested = "untested" // the control did not reach the canary here, or the attempt could not run
	NA       = "n/a"      // the case does not apply here (see Reason)
)

// Result is the outcome of one case.
type Result struct {
	ID       string `json:"id"`
	Group    string `json:"group"`
	Tries    string `json:"tries"`
	Verdict  string `json:"verdict"`
	Expected string `json:"expected"`
	// ExpectedWhy is the matrix's reason for that expectation, if it
	// gives one (why it does not apply, why the mechanism cannot hold it).
	ExpectedWhy string `json:"expected_why,omitempty"`
	// Reason says why the verdict is what it is, in one line.
	Reason string `json:"reason"`
	// Error marks an untested verdict caused by the runner or the probe
	// failing, rather than by the machine (a bug to fix, not a limit).
	Error bool `json:"error,omitempty"`
	// UntestedAttempts counts the attempts of a held case whose control
	// reached nothing here (its Reason lists them after "untested here:").
	UntestedAttempts int      `json:"untested_attempts,omitempty"`
	Control          []string `json:"control,omitempty"`
	Confined         []string `json:"confined,omitempty"`
	DurationMS       int64    `json:"duration_ms"`
}

// Unexpected reports whether the verdict contradicts the case's
// expectation: an escape where a hold was expected, or a hold where the
// matrix says the mechanism lets the attempt through (the table is wrong).
func (r Result) Unexpected() bool {
	switch r.Verdict {
	case Escaped:
		return r.Expected != ExpectEscaped
	case Held:
		return r.Expected == ExpectEscaped
	}
	return false
}

// probeRun is what one run of a probe printed.
type probeRun struct {
	subs    map[string]bool // attempt -> reached
	details map[string]string
	order   []string
	verdict string // reached, blocked, or "" when the probe printed none
	detail  string
	lines   []string
}

func parseProbe(out string) probeRun {
	r := probeRun{subs: map[string]bool{}, details: map[string]string{}}
	for _, l := range strings.Split(out, "\n") {
		l = strings.TrimRight(l, "\r")
		f := strings.SplitN(l, " ", 4)
		switch {
		case len(f) >= 3 && f[0] == "SUB":
			if _, dup := r.subs[f[1]]; !dup {
				r.order = append(r.order, f[1])
			}
			r.subs[f[1]] = r.subs[f[1]] || f[2] == probe.Reached
			if len(f) == 4 {
				r.details[f[1]] = f[3]
			}
			r.lines = append(r.lines, strings.TrimPrefix(l, "SUB "))
		case len(f) >= 2 && f[0] == "VERDICT":
			r.verdict = f[1]
			r.detail = strings.TrimPrefix(strings.TrimPrefix(l, "VERDICT "+f[1]), " ")
		}
	}
	return r
}

// classify compares the control with the confined attempt, attempt by
// attempt. Any attempt that reached its canary confined is an escape,
// whatever its control did; an attempt whose control failed is untested;
// the case is held only when at least one attempt was tested and none
// reached. untested counts the attempts whose control failed.
func classify(ctl, cnf probeRun) (verdict, reason string, untested int) {
	var escaped, held, notTested []string
	names := append([]string(nil), ctl.order...)
	for _, n := range cnf.order {
		if _, ok := ctl.subs[n]; !ok {
			names = append(names, n)
		}
	}
	for _, n := range names {
		switch {
		case cnf.subs[n]:
			escaped = append(escaped, fmt.Sprintf("%s (%s)", n, cnf.details[n]))
		case ctl.subs[n]:
			held = append(held, n)
		default:
			notTested = append(notTested, fmt.Sprintf("%s (control: %s)", n, ctl.details[n]))
		}
	}
	sort.Strings(notTested)
	switch {
	case len(escaped) > 0:
		return Escaped, "reached confined: " + strings.Join(escaped, "; "), len(notTested)
	case len(held) == 0:
		return Untested, "the control reached nothing unconfined here: " + strings.Join(notTested, "; "), len(notTested)
	}
	reason = fmt.Sprintf("%d of %d attempts reached their canary unconfined and not confined", len(held), len(names))
	if len(notTested) > 0 {
		reason += "; untested here: " + strings.Join(notTested, "; ")
	}
	return Held, reason, len(notTested)
}
