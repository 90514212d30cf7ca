package initproc

import (
	"errors"
	"reflect"
	"testing"
)

func TestArgsRoundTrip(t *testing.T) {
	for _, c := range []Config{
		{StatusFD: 4, StderrFD: 5, Forward: []Forward{{Port: 3128, Socket: "/run/e.sock"}}, Command: []string{"sh", "-c", "echo --status-fd 9"}},
		{StatusFD: 4, StderrFD: 5, TTY: true, Command: []string{"bash", "--tty"}},
	} {
		got, err := ParseArgs(c.Args())
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(got, c) {
			t.Errorf("round trip = %+v, want %+v", got, c)
		}
	}
}

func TestParseArgsRefuses(t *testing.T) {
	for _, args := range [][]string{
		{},
		{"--status-fd", "4", "--stderr-fd", "5"},
		{"--status-fd", "4", "--stderr-fd", "5", "--"},
		{"--stderr-fd", "5", "--", "true"},
		{"--status-fd", "x", "--stderr-fd", "5", "--", "true"},
		{"--status-fd", "4", "--stderr-fd", "5", "--forward", "99999=/s", "--", "true"},
		{"--status-fd", "4", "--stderr-fd", "5", "--bogus", "--", "true"},
	} {
		if _, err := ParseArgs(args); !errors.Is(err, ErrUsage) {
			t.Errorf("ParseArgs(%q) = %v, want ErrUsage", args, err)
		}
	}
}

// TestStatusSocketArgs: the tier-2 form of init's command line (a status
// socket instead of a descriptor, stderr on 2) round-trips, and a stderr
// below 2 or a missing status is refused.
func TestStatusSocketArgs(t *testing.T) {
	c := Config{StatusFD: -1, StatusSocket: "/run/sandbox-run/status.sock", StderrFD: 2, Command: []string{"true"}}
	got, err := ParseArgs(c.Args())
	if err != nil || got.StatusSocket != c.StatusSocket || got.StderrFD != 2 || got.Command[0] != "true" {
		t.Fatalf("%+v, %v", got, err)
	}
	for _, bad := range [][]string{
		{"--status-socket", "/s", "--stderr-fd", "1", "--", "true"},
		{"--stderr-fd", "2", "--", "true"},
		{"--status-socket", "--", "true"},
	} {
		if _, err := ParseArgs(bad); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
}
