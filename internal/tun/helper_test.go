package tun

import (
	"net/netip"
	"reflect"
	"testing"
)

// TestHelperArgsRoundTrip: the helper reads back exactly what Args wrote,
// bwrap's command line untouched after "--"; a short or malformed line is
// refused.
func TestHelperArgsRoundTrip(t *testing.T) {
	for _, h := range []Helper{
		{Sock: 17, UID: 65534, GID: 65534, SetGroups: true,
			Device:  Config{Name: "tun0", Addr: netip.MustParsePrefix("10.0.2.15/24"), MTU: 65520, Route: true, VnetHdr: true},
			Inotify: Inotify{Instances: 32, Watches: 8192},
			Argv:    []string{"/usr/bin/bwrap", "--args", "3", "--", "/proc/self/fd/7", "--", "x"}},
		{Sock: 9, UID: 1002, GID: 1002,
			Device: Config{Name: "tun1", Addr: netip.MustParsePrefix("192.0.2.1/30"), MTU: 1500},
			Argv:   []string{"bwrap"}},
	} {
		a := h.Args()
		if a[0] != HelperArg {
			t.Fatalf("Args()[0] = %q, want %q", a[0], HelperArg)
		}
		got, err := parseHelper(a[1:])
		if err != nil {
			t.Fatalf("parseHelper(%q): %v", a, err)
		}
		if !reflect.DeepEqual(got, h) {
			t.Errorf("round trip:\n got %+v\nwant %+v", got, h)
		}
	}
	for _, bad := range [][]string{
		nil,
		{"3", "0", "0", "0", "tun0", "10.0.2.15/24", "65520", "true", "true", "0", "0", "--"},           // no command
		{"3", "0", "0", "0", "tun0", "10.0.2.15/24", "65520", "true", "true", "0", "0", "x", "bwrap"},   // no "--"
		{"3", "0", "0", "0", "tun0", "10.0.2.15/24", "65520", "true", "true", "--", "bwrap"},            // no ceiling
		{"-3", "0", "0", "0", "tun0", "10.0.2.15/24", "65520", "true", "true", "0", "0", "--", "bwrap"}, // negative descriptor
		{"3", "0", "0", "0", "tun0", "10.0.2.15", "65520", "true", "true", "0", "0", "--", "bwrap"},     // not a prefix
		{"3", "0", "0", "0", "tun0", "10.0.2.15/24", "65520", "true", "true", "-1", "0", "--", "bwrap"}, // negative ceiling
	} {
		if _, err := parseHelper(bad); err == nil {
			t.Errorf("parseHelper(%q) accepted", bad)
		}
	}
}
