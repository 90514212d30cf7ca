package initproc

import (
	"reflect"
	"testing"
)

// TestForwardPublishArgs: host-port forwards with an address and
// published ports survive init's command line.
func TestForwardPublishArgs(t *testing.T) {
	c := Config{StatusFD: 3, StderrFD: 4, Command: []string{"true"},
		Forward: []Forward{{Port: 3128, Socket: "/run/e.sock"}, {Port: 5432, Socket: "/run/h.sock", Addr: "127.0.0.2"}, {Port: 80, Socket: "/run/6.sock", Addr: "::1"}},
		Publish: []Forward{{Port: 8000, Socket: "/run/p.sock"}}}
	got, err := ParseArgs(c.Args())
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got.Forward, c.Forward) || !reflect.DeepEqual(got.Publish, c.Publish) {
		t.Errorf("round trip: forward %+v publish %+v, want %+v %+v", got.Forward, got.Publish, c.Forward, c.Publish)
	}
	for _, bad := range []string{"0=/s", "x=/s", "127.0.0.1:70000=/s", "80=", "80"} {
		if _, err := ParseArgs([]string{"--status-fd", "3", "--stderr-fd", "4", "--publish", bad, "--", "true"}); err == nil {
			t.Errorf("--publish %q accepted", bad)
		}
	}
}
