package check

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"sort"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/sandbox-run/sandbox-run/internal/matrix"
)

// Statuses of one check.
const (
	StatusOK       = "ok"
	StatusWarn     = "warn"
	StatusFail     = "fail"
	StatusUntested = "untested"
)

// Item is one line of check's output.
type Item struct {
	ID          string   `json:"id"`
	Category    string   `json:"category"`
	Status      string   `json:"status"`
	Summary     string   `json:"summary"`
	Details     []string `json:"details,omitempty"`
	Remediation string   `json:"remediation,omitempty"`
	DurationMS  int64    `json:"duration_ms"`
	// UntestedAttempts counts the attempts of a held self-test case that
	// could not be tested here (listed in its Summary after "untested
	// here:"); the verdict counts them.
	UntestedAttempts int `json:"untested_attempts,omitempty"`
	// Tier is the tier the node has, on every item, so that each JSON
	// object stands alone.
	Tier int `json:"tier"`
}

// Report is what check found.
type Report struct {
	Tier      int    `json:"tier"`
	Mechanism string `json:"mechanism"`
	Verdict   string `json:"verdict"`
	Items     []Item `json:"checks"`
	// Incomplete is set when check itself could not run (exit 2).
	Incomplete bool `json:"incomplete,omitempty"`
}

// Options say what check runs.
type Options struct {
	// Binary is the sandbox-run binary tested; empty means this process.
	Binary string
	// Full runs the whole escape matrix; otherwise the fast subset.
	Full bool
	// Mechanism is "" (the platform's own: bwrap or seatbelt), "landlock"
	// (Linux: the landlock sandbox and its matrix column) or "gvisor"
	// (tier 2: its matrix column, and the verdict is tier 2's).
	Mechanism string
}

// Check probes the environment and runs the self-test. A Report always
// comes back; Incomplete says check could not finish.
func Check(ctx context.Context, opts Options) Report {
	var items []Item
	add := func(it Item) { items = append(items, it) }
	env, mechanism, ready := environment(ctx, opts.Binary)
	if opts.Mechanism == "landlock" {
		env, mechanism, ready = landlockEnvironment(ctx, opts.Binary)
	}
	for _, it := range env {
		add(it)
	}
	t2 := tier2Item(ctx, opts.Binary)
	if opts.Mechanism == "gvisor" {
		mechanism, ready = "gvisor", t2.Status == StatusOK
	}
	rep := Report{Mechanism: mechanism}
	if ready {
		cases, err := matrix.Load()
		if err != nil {
			add(Item{ID: "matrix", Category: "self-test", Status: StatusFail, Summary: "egress-cases.json does not load", Details: []string{err.Error()},
				Remediation: "report this as a bug in sandbox-run"})
			rep.Incomplete = true
		} else {
			start := time.Now()
			results, err := matrix.Run(ctx, cases, matrix.RunOptions{Binary: opts.Binary, Mechanism: opts.Mechanism, Filter: func(c matrix.Case) bool { return opts.Full || c.Fast }})
			if err != nil {
				add(Item{ID: "matrix", Category: "self-test", Status: StatusFail, Summary: "the escape matrix could not be set up", Details: []string{err.Error()},
					Remediation: "check that /tmp is writable and loopback is up", DurationMS: time.Since(start).Milliseconds()})
				rep.Incomplete = true
			}
			for _, r := range results {
				add(resultItem(r))
			}
		}
	}
	if t2.ID != "" {
		items = append(items, t2, imagesItem(ctx, t2))
	}
	rep.Items = items
	rep.Tier, rep.Verdict = tier(items, ready, mechanism)
	if mechanism == "gvisor" && rep.Tier == 1 {
		rep.Tier, rep.Verdict = 2, strings.Replace(rep.Verdict, "tier 1", "tier 2", 1)
	}
	if t2.ID != "" {
		rep.Verdict += "; " + t2.Summary
	}
	for i := range rep.Items {
		rep.Items[i].Tier = rep.Tier
	}
	return rep
}

func resultItem(r matrix.Result) Item {
	it := Item{ID: "matrix/" + r.ID, Category: "self-test/" + r.Group, Summary: r.Verdict + ": " + r.Reason,
		Details:    append(append([]string{"tries: " + r.Tries, "expected: " + r.Expected}, prefix("control: ", r.Control)...), prefix("confined: ", r.Confined)...),
		DurationMS: r.DurationMS, UntestedAttempts: r.UntestedAttempts}
	if r.ExpectedWhy != "" {
		it.Details = append(it.Details, "why: "+r.ExpectedWhy)
	}
	switch {
	case r.Verdict == matrix.Escaped && r.Expected == matrix.ExpectEscaped:
		// A gap the matrix declares for this mechanism on this platform
		// (Seatbelt has no PID namespace): shown, never hidden, but not
		// what this mechanism's tier 1 claims to hold.
		it.Status = StatusWarn
		it.Summary = "ESCAPED, a known gap of this mechanism: " + r.Reason
		it.Remediation = "nothing on this node can fix it"
		if r.ExpectedWhy != "" {
			it.Remediation += " (" + r.ExpectedWhy + ")"
		}
		it.Remediation += "; where it matters, run the work on Linux with bubblewrap"
	case r.Verdict == matrix.Escaped:
		it.Status = StatusFail
		it.Remediation = "the sandbox let this attempt through: do not run untrusted work on this node; report it with `sandbox-run check --full --json`"
	case r.Error:
		it.Status = StatusFail
		it.Remediation = "the attempt could not run: report this as a bug with `sandbox-run check --full --json`"
	case r.Verdict == matrix.Untested:
		it.Status = StatusUntested
	case r.Verdict == matrix.Held || r.Verdict == matrix.NA:
		it.Status = StatusOK
	}
	return it
}

func prefix(p string, s []string) []string {
	out := make([]string, len(s))
	for i, v := range s {
		out[i] = p + v
	}
	return out
}

// tier decides the node's tier: 1 when the sandbox could be set up, no
// check failed, and every group of the self-test that ran held at least
// one attempt (a group where nothing could be tested proves nothing). A
// self-test item that is only a warning is a gap the matrix declares for
// the mechanism (resultItem): it neither fails the tier nor counts as
// testing its group.
func tier(items []Item, ready bool, mechanism string) (int, string) {
	var fails, warns, untested []string
	attempts := 0 // untested attempts of held cases
	held := map[string]int{}
	ran := map[string]bool{}
	for _, it := range items {
		switch it.Status {
		case StatusFail:
			fails = append(fails, it.ID)
		case StatusWarn:
			warns = append(warns, it.ID)
		case StatusUntested:
			untested = append(untested, it.ID)
		}
		attempts += it.UntestedAttempts
		// A case the matrix declares n/a for this mechanism tests nothing:
		// a group of only such cases (the host-kernel group under gVisor,
		// whose Sentry answers those calls) is not a group that ran.
		if g, ok := strings.CutPrefix(it.Category, "self-test/"); ok && it.Status != StatusWarn && !strings.HasPrefix(it.Summary, matrix.NA+":") {
			ran[g] = true
			if strings.HasPrefix(it.Summary, matrix.Held+":") {
				held[g]++
			}
		}
	}
	var empty []string
	for g := range ran {
		if held[g] == 0 {
			empty = append(empty, g)
		}
	}
	sort.Strings(empty)
	counts := fmt.Sprintf("%d failed, %d warnings, %d untested", len(fails), len(warns), len(untested))
	if attempts > 0 {
		counts += fmt.Sprintf(" and %d untested %s in held cases", attempts, plural(attempts, "attempt", "attempts"))
	}
	switch {
	case !ready:
		return 0, "tier 0: no sandbox can be set up here (" + counts + "); fix the failed checks above"
	case len(fails) > 0:
		return 0, "tier 0: " + strings.Join(fails, ", ") + " failed (" + counts + ")"
	case len(empty) > 0:
		return 0, "tier 0: nothing in " + strings.Join(empty, ", ") + " could be tested here (" + counts + ")"
	}
	return 1, fmt.Sprintf("tier 1 (%s): every check that applies holds (%s)", mechanism, counts)
}

func plural(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}

// WriteText prints the report as an aligned table and a verdict line.
func (r Report) WriteText(w io.Writer) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "CHECK\tSTATUS\tSUMMARY")
	for _, it := range r.Items {
		s := it.Summary
		if it.Remediation != "" && it.Status != StatusOK {
			s += "; fix: " + it.Remediation
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\n", it.ID, it.Status, s)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	_, err := fmt.Fprintf(w, "verdict: %s\n", r.Verdict)
	return err
}

// WriteJSON prints the report as one JSON object.
func (r Report) WriteJSON(w io.Writer) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(r)
}

// ExitCode is check's exit status: 0 at tier 1, 1 below it, 2 when check
// itself could not run.
func (r Report) ExitCode() int {
	switch {
	case r.Incomplete:
		return 2
	case r.Tier >= 1:
		return 0
	}
	return 1
}
