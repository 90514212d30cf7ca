package matrix

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"regexp"
	"slices"
	"sort"
	"strings"

	sandboxrun "github.com/sandbox-run/sandbox-run"
)

// Mechanisms and Platforms are every sandbox mechanism sandbox-run can
// report (report.Report.Mechanism) and every platform it ships for. Each
// case holds an expectation for each pair; a pair without one fails Load.
var (
	Mechanisms = []string{"bwrap", "gvisor", "landlock", "seatbelt", "none"}
	Platforms  = []string{"linux", "darwin", "windows"}
)

// Expectations a case may hold for a mechanism on a platform.
const (
	ExpectHeld     = "held"     // the attempt must not reach its canary
	ExpectEscaped  = "escaped"  // the attempt reaches it: tier 0, honestly
	ExpectNA       = "n/a"      // the mechanism does not exist there, or the attempt means nothing there
	ExpectUntested = "untested" // not claimed: nothing has exercised it yet
)

// Groups of cases.
var Groups = []string{"fs", "proc", "net", "proxy", "kernel", "lifecycle"}

// Case is one row of egress-cases.json: one attempt to get out.
type Case struct {
	ID    string `json:"id"`
	Group string `json:"group"`
	// Tries says what the attempt does, in one line.
	Tries string `json:"tries"`
	// Probe and Args are what runs: sandbox-run __probe PROBE ARGS...
	// Args may hold ${name} placeholders the runner fills in (see Vars).
	Probe string   `json:"probe"`
	Args  []string `json:"args,omitempty"`
	// Canary names what the attempt aims at.
	Canary string `json:"canary"`
	// Setup names fixtures made in both workdirs before the attempt:
	// "protected-present", "git-present".
	Setup []string `json:"setup,omitempty"`
	// Network is "" (none), "proxy" (the built-in proxy, --allow-host
	// Allow) or "node-proxy" (a proxy on a Unix socket the runner serves,
	// resolving through the DNS canary; --egress-socket).
	Network string   `json:"network,omitempty"`
	Allow   []string `json:"allow,omitempty"`
	// Control is how the positive control runs: "" as the sandbox's own
	// uid, unconfined; "caller" as the uid that runs the matrix (root's
	// own hole); "userns" in a new user and network namespace, where an
	// unprivileged process holds the capabilities the attempt needs.
	Control string `json:"control,omitempty"`
	// Launch is how the probe is started: "" plain, "fds" with the flag
	// file open on inherited descriptors, "pty" on a terminal it controls,
	// "sigkill" with sandbox-run killed by SIGKILL once the probe says so.
	Launch string `json:"launch,omitempty"`
	// Judge is "" (the probe's own verdict), "survivor" (the runner looks
	// for processes left behind after the run), "host-file" (the runner
	// looks for ${written} on the host: a write that lands in the
	// sandbox's private /tmp reached nothing), "host-file-late" (the same,
	// waiting up to hostFileWait for a write that a host service makes
	// after the run: launchd, Terminal), "pasteboard" (the host's
	// pasteboard holds ${exfil_name} after the run; macOS), "dns-log"
	// (the DNS canary was asked for ${exfil_name}) or "port-canary" (a
	// UDP canary the runner binds on the host at the address the probe
	// reads from its proxy variable, once the probe has named it,
	// received ${exfil_name}; the control's proxy variable names the TCP
	// canary).
	Judge string `json:"judge,omitempty"`
	// Requires lists what the machine must offer, or the case is n/a:
	// "root".
	Requires []string `json:"requires,omitempty"`
	// Arch limits the case to these GOARCH values; empty means all.
	Arch []string `json:"arch,omitempty"`
	// Fast puts the case in check's default self-test.
	Fast bool `json:"fast,omitempty"`
	// Expect is the expected outcome per mechanism, then per platform.
	Expect map[string]map[string]string `json:"expect"`
	// Why says, per mechanism and platform, why an expectation is what it
	// is when that is not plain: why an attempt does not apply, why a
	// mechanism cannot hold it, or why nothing is claimed. The seatbelt
	// column on darwin must give a reason for every expectation other
	// than held (TestSeatbeltReasons).
	Why map[string]map[string]string `json:"why,omitempty"`
}

// Expected returns the expectation for mechanism on platform, "" if none.
func (c Case) Expected(mechanism, platform string) string { return c.Expect[mechanism][platform] }

// Reason returns the reason given for the expectation of mechanism on
// platform, "" if none.
func (c Case) Reason(mechanism, platform string) string { return c.Why[mechanism][platform] }

// Vars are the placeholders a case's Args and Allow may use.
var Vars = []string{
	"flag", "flag_rel", "flag_dslash", "token", "outside",
	"tcp4", "tcp6", "tcp_host", "tcp_port", "udp4", "dns", "unix", "abstract",
	"marker_pid", "marker_tag", "marker_secret", "marker_key", "sysctl", "redirector", "redirector_url", "survivor_tag", "exfil_name", "written",
	"launchd_label", "pkg_flag",
}

// probes lists every probe name the binary implements (see Probe).
var probes = []string{
	"read-file", "hardlink", "read-fds", "write-paths", "rename-trick",
	"tcp-connect", "udp-echo", "udp-proxy-port", "dns-query", "unix-connect", "raw-socket", "http-get",
	"proc-signal", "proc-environ", "ptrace", "userns", "seccomp", "tty-inject",
	"sysctl-write", "proc-hidden", "spawn", "foreign-abi", "exec",
}

// Load parses and validates the embedded egress-cases.json.
func Load() ([]Case, error) { return Parse(sandboxrun.EgressCases) }

// Parse parses and validates an escape matrix.
func Parse(b []byte) ([]Case, error) {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	var doc struct {
		Comment string `json:"comment"`
		Cases   []Case `json:"cases"`
	}
	if err := dec.Decode(&doc); err != nil {
		return nil, fmt.Errorf("check: egress-cases.json: %w", err)
	}
	// Compiled here, not at package init: every sandbox-run run would pay
	// for them, and only check parses the matrix.
	idRE := regexp.MustCompile(`^[a-z0-9]+(-[a-z0-9]+)*$`)
	varRE := regexp.MustCompile(`\$\{([a-z0-9_]*)\}?`)
	var errs []error
	seen := map[string]bool{}
	for i, c := range doc.Cases {
		bad := c.problems(idRE, varRE)
		if seen[c.ID] {
			bad = append(bad, "duplicate id")
		}
		seen[c.ID] = true
		for _, why := range bad {
			errs = append(errs, fmt.Errorf("check: egress-cases.json: case %d (%s): %s", i, c.ID, why))
		}
	}
	if len(doc.Cases) == 0 {
		errs = append(errs, errors.New("check: egress-cases.json holds no cases"))
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	return doc.Cases, nil
}

// problems lists what is wrong with c on its own: its fields, then its
// expectations and reasons.
func (c Case) problems(idRE, varRE *regexp.Regexp) []string {
	return append(c.fieldProblems(idRE, varRE), c.expectProblems()...)
}

func (c Case) fieldProblems(idRE, varRE *regexp.Regexp) []string {
	var bad []string
	if !idRE.MatchString(c.ID) {
		bad = append(bad, "id must be lower-case words joined by '-'")
	}
	if !slices.Contains(Groups, c.Group) {
		bad = append(bad, fmt.Sprintf("group %q is not one of %s", c.Group, strings.Join(Groups, ", ")))
	}
	if c.Tries == "" || c.Canary == "" {
		bad = append(bad, "tries and canary must say what the attempt does and aims at")
	}
	if !slices.Contains(probes, c.Probe) {
		bad = append(bad, fmt.Sprintf("probe %q is not implemented", c.Probe))
	}
	for _, s := range append(slices.Clone(c.Args), c.Allow...) {
		for _, m := range varRE.FindAllStringSubmatch(s, -1) {
			if !strings.HasSuffix(m[0], "}") || !slices.Contains(Vars, m[1]) {
				bad = append(bad, fmt.Sprintf("unknown placeholder %q", m[0]))
			}
		}
	}
	return append(bad, c.modeProblems()...)
}

// modeProblems checks the fields that name how the case runs and is
// judged, and what it needs.
func (c Case) modeProblems() []string {
	var bad []string
	if !oneOf(c.Network, "", "proxy", "node-proxy") || !oneOf(c.Control, "", "caller", "userns") ||
		!oneOf(c.Launch, "", "fds", "pty", "sigkill") || !oneOf(c.Judge, "", "survivor", "dns-log", "host-file", "host-file-late", "pasteboard", "port-canary") {
		bad = append(bad, "network, control, launch or judge has an unknown value")
	}
	if c.Network == "proxy" && len(c.Allow) == 0 {
		bad = append(bad, "network proxy needs an allow list (--allow-host)")
	}
	if c.Judge == "port-canary" && (c.Network == "" || c.Probe != "udp-proxy-port") {
		bad = append(bad, "judge port-canary needs a proxy (network) and the udp-proxy-port probe, which names the port")
	}
	for _, r := range c.Requires {
		if r != "root" {
			bad = append(bad, fmt.Sprintf("unknown requirement %q", r))
		}
	}
	for _, s := range c.Setup {
		if !oneOf(s, "protected-present", "git-present", "flag-link") {
			bad = append(bad, fmt.Sprintf("unknown setup %q", s))
		}
	}
	return bad
}

// expectProblems checks that c expects one outcome for every mechanism on
// every platform, and gives reasons only where it expects something.
func (c Case) expectProblems() []string {
	var bad []string
	for m := range c.Expect {
		if !slices.Contains(Mechanisms, m) {
			bad = append(bad, fmt.Sprintf("expectation for unknown mechanism %q", m))
		}
	}
	for m, byPlatform := range c.Why {
		for p, why := range byPlatform {
			if c.Expected(m, p) == "" {
				bad = append(bad, fmt.Sprintf("a reason for %s on %s, which has no expectation", m, p))
			}
			if strings.TrimSpace(why) == "" {
				bad = append(bad, fmt.Sprintf("an empty reason for %s on %s", m, p))
			}
		}
	}
	for _, m := range Mechanisms {
		for p := range c.Expect[m] {
			if !slices.Contains(Platforms, p) {
				bad = append(bad, fmt.Sprintf("expectation for unknown platform %q", p))
			}
		}
		for _, p := range Platforms {
			switch e := c.Expected(m, p); e {
			case ExpectHeld, ExpectEscaped, ExpectNA, ExpectUntested:
			case "":
				bad = append(bad, fmt.Sprintf("no expectation for mechanism %s on %s", m, p))
			default:
				bad = append(bad, fmt.Sprintf("expectation %q for %s on %s is not held, escaped, n/a or untested", e, m, p))
			}
		}
	}
	return bad
}

// Coverage checks that the matrix has a row for every mechanism on every
// platform where it exists, and that every group is exercised: a mechanism
// or platform without a case that claims something fails.
func Coverage(cases []Case) error {
	var errs []error
	for _, m := range Mechanisms {
		claimed := false
		for _, c := range cases {
			for _, p := range Platforms {
				if e := c.Expected(m, p); e == ExpectHeld || e == ExpectEscaped || e == ExpectUntested {
					claimed = true
				}
			}
		}
		if !claimed {
			errs = append(errs, fmt.Errorf("check: mechanism %s has no case that expects anything of it", m))
		}
	}
	for _, p := range Platforms {
		claimed := false
		for _, c := range cases {
			for _, m := range Mechanisms {
				if e := c.Expected(m, p); e != ExpectNA && e != "" {
					claimed = true
				}
			}
		}
		if !claimed {
			errs = append(errs, fmt.Errorf("check: platform %s has no case that expects anything on it", p))
		}
	}
	for _, g := range Groups {
		if !slices.ContainsFunc(cases, func(c Case) bool { return c.Group == g }) {
			errs = append(errs, fmt.Errorf("check: group %s has no case", g))
		}
	}
	return errors.Join(errs...)
}

func oneOf(s string, set ...string) bool { return slices.Contains(set, s) }

// expand fills the ${name} placeholders of s from vars; a name without a
// value is an error (the runner sets every name it can; a case whose
// canary could not be set up never runs).
func expand(s string, vars map[string]string) (string, error) {
	var missing []string
	out := os.Expand(s, func(k string) string {
		v, ok := vars[k]
		if !ok {
			missing = append(missing, k)
		}
		return v
	})
	if len(missing) > 0 {
		sort.Strings(missing)
		return "", fmt.Errorf("no %s on this machine", strings.Join(missing, ", "))
	}
	return out, nil
}
