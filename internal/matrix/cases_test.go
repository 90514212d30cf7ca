package matrix

import (
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

func TestMatrixLoadsAndCovers(t *testing.T) {
	cases, err := Load()
	if err != nil {
		t.Fatal(err)
	}
	if err := Coverage(cases); err != nil {
		t.Error(err)
	}
	fast := 0
	for _, c := range cases {
		if c.Fast {
			fast++
		}
	}
	if fast == 0 || fast > 15 {
		t.Errorf("%d fast cases: check's default self-test wants a small subset", fast)
	}
}

// TestEveryReportedMechanismHasAColumn ties the matrix to the code: every
// Mechanism a sandbox report can carry, and every platform sandbox/ has a
// file for, must be a column of egress-cases.json (which Parse then
// requires every row to fill).
func TestEveryReportedMechanismHasAColumn(t *testing.T) {
	files, err := filepath.Glob("../../sandbox/*.go")
	if err != nil || len(files) == 0 {
		t.Fatalf("no sandbox sources: %v", err)
	}
	mechRE := regexp.MustCompile(`Mechanism:\s*"([a-z0-9-]+)"`)
	goosRE := regexp.MustCompile(`_(linux|darwin|windows|freebsd|openbsd|netbsd|illumos|solaris|aix|dragonfly|plan9|js|wasip1|ios|android)(_test)?\.go$`)
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range mechRE.FindAllStringSubmatch(string(b), -1) {
			if !slices.Contains(Mechanisms, m[1]) {
				t.Errorf("%s reports mechanism %q, which egress-cases.json has no column for", f, m[1])
			}
		}
		if m := goosRE.FindStringSubmatch(f); m != nil && !slices.Contains(Platforms, m[1]) {
			t.Errorf("sandbox/ has %s for platform %s, which egress-cases.json has no column for", filepath.Base(f), m[1])
		}
	}
}

func TestParseRefuses(t *testing.T) {
	full := `"expect":{"bwrap":{"linux":"held","darwin":"n/a","windows":"n/a"},"gvisor":{"linux":"held","darwin":"n/a","windows":"n/a"},"landlock":{"linux":"held","darwin":"n/a","windows":"n/a"},"seatbelt":{"linux":"n/a","darwin":"held","windows":"n/a"},"none":{"linux":"escaped","darwin":"escaped","windows":"escaped"}}`
	row := func(extra, expect string) string {
		return `{"cases":[{"id":"a-b","group":"fs","tries":"t","probe":"read-file","canary":"c"` + extra + `,` + expect + `}]}`
	}
	if _, err := Parse([]byte(row(`,"args":["${flag}"]`, full))); err != nil {
		t.Fatalf("a good row: %v", err)
	}
	tests := []struct{ name, doc, want string }{
		{"missing platform", row("", strings.Replace(full, `,"windows":"escaped"`, "", 1)), "no expectation for mechanism none on windows"},
		{"missing mechanism", row("", strings.Replace(full, `,"none":{"linux":"escaped","darwin":"escaped","windows":"escaped"}`, "", 1)), "no expectation for mechanism none"},
		{"missing landlock column", row("", strings.Replace(full, `"landlock":{"linux":"held","darwin":"n/a","windows":"n/a"},`, "", 1)), "no expectation for mechanism landlock on linux"},
		{"unknown mechanism", row("", strings.Replace(full, `"none":`, `"vmlane":`, 1)), `unknown mechanism "vmlane"`},
		{"bad expectation", row("", strings.Replace(full, `"held"`, `"fine"`, 1)), `"fine"`},
		{"unknown placeholder", row(`,"args":["${nope}"]`, full), "unknown placeholder"},
		{"unknown probe", strings.Replace(row("", full), "read-file", "teleport", 1), `probe "teleport"`},
		{"unknown field", row(`,"expected":1`, full), "unknown field"},
		{"reason without an expectation", row(`,"why":{"seatbelt":{"plan9":"x"}}`, full), "has no expectation"},
		{"empty reason", row(`,"why":{"seatbelt":{"darwin":" "}}`, full), "empty reason"},
		{"port canary without a proxy", row(`,"judge":"port-canary"`, full), "judge port-canary needs a proxy"},
		{"port canary with another probe", row(`,"judge":"port-canary","network":"proxy","allow":["example.com"]`, full), "judge port-canary needs"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Parse([]byte(tt.doc))
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("err = %v, want it to say %q", err, tt.want)
			}
		})
	}
}

func TestClassify(t *testing.T) {
	run := func(out string) probeRun { return parseProbe(out) }
	tests := []struct {
		name, ctl, cnf, want string
		untested             int
	}{
		{"held", "SUB a reached x\nVERDICT reached x", "SUB a blocked no\nVERDICT blocked no", Held, 0},
		{"escaped", "SUB a reached x\nVERDICT reached x", "SUB a reached x\nVERDICT reached x", Escaped, 0},
		{"control failed", "SUB a blocked x\nVERDICT blocked x", "SUB a blocked x\nVERDICT blocked x", Untested, 1},
		{"escape where control failed is still an escape", "SUB a blocked x\nVERDICT blocked x", "SUB a reached x\nVERDICT reached x", Escaped, 0},
		{"partly tested", "SUB a reached x\nSUB b blocked y\nVERDICT reached", "SUB a blocked\nSUB b blocked\nVERDICT blocked", Held, 1},
		{"one of two escapes", "SUB a reached\nSUB b reached\nVERDICT reached", "SUB a blocked\nSUB b reached\nVERDICT reached", Escaped, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got, why, n := classify(run(tt.ctl), run(tt.cnf)); got != tt.want || n != tt.untested {
				t.Errorf("classify = %s, %d untested (%s), want %s, %d", got, n, why, tt.want, tt.untested)
			}
		})
	}
}

// darwinProbes are the probes the darwin build implements: probe.go's
// portable ones and probe_darwin.go's.
var darwinProbes = []string{
	"read-file", "hardlink", "read-fds", "write-paths", "rename-trick",
	"tcp-connect", "udp-echo", "udp-proxy-port", "dns-query", "unix-connect", "http-get", "spawn",
	"raw-socket", "proc-signal", "proc-environ", "tty-inject", "exec",
}

// TestSeatbeltColumn: the seatbelt column on darwin says what the profile
// is designed to do, and gives a reason for everything that is not a
// plain hold; every case it runs there has a macOS probe and canary.
func TestSeatbeltColumn(t *testing.T) {
	cases, err := Load()
	if err != nil {
		t.Fatal(err)
	}
	held := 0
	for _, c := range cases {
		exp := c.Expected("seatbelt", "darwin")
		if exp != ExpectHeld && c.Reason("seatbelt", "darwin") == "" {
			t.Errorf("%s: seatbelt on darwin is %s without a reason (why)", c.ID, exp)
		}
		if exp == ExpectHeld {
			held++
		}
		for _, p := range Platforms {
			if p != "darwin" && c.Expected("seatbelt", p) != ExpectNA {
				t.Errorf("%s: seatbelt exists only on darwin, yet expects %s on %s", c.ID, c.Expected("seatbelt", p), p)
			}
		}
		if exp == ExpectNA {
			continue
		}
		if !slices.Contains(darwinProbes, c.Probe) {
			t.Errorf("%s: seatbelt on darwin expects %s, but probe %s has no macOS form", c.ID, exp, c.Probe)
		}
		for _, a := range append(slices.Clone(c.Args), c.Allow...) {
			for _, v := range []string{"${abstract}", "${sysctl}", "${marker_key}", "/proc/"} {
				if strings.Contains(a, v) {
					t.Errorf("%s: argument %q needs Linux (%s)", c.ID, a, v)
				}
			}
		}
	}
	if held == 0 {
		t.Error("the seatbelt column holds nothing")
	}
}
