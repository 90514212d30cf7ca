package initproc

import (
	"errors"
	"net/netip"
	"os"
	"reflect"
	"runtime"
	"testing"

	"github.com/sandbox-run/sandbox-run/internal/limits"
)

func TestArgsRoundTrip(t *testing.T) {
	for _, c := range []Config{
		{StatusFD: 4, StderrFD: 5, Forward: []Forward{{Port: 3128, Socket: "/run/e.sock"}}, Command: []string{"sh", "-c", "echo --status-fd 9"}},
		{StatusFD: 4, StderrFD: 5, GateFD: 12, Forward: []Forward{{Port: 3128, Socket: "/run/e.sock"}}, Command: []string{"true"}},
		{StatusFD: 4, StderrFD: 5, TTY: true, Command: []string{"bash", "--tty"}},
		{StatusFD: -1, StatusSocket: "/run/s.sock", StderrFD: 2, Tun: &Tun{Addr: netip.MustParsePrefix("10.0.2.15/0"), Socket: "/run/t.sock"}, Command: []string{"true"}},
		{StatusFD: 4, StderrFD: 5, Rlimits: []limits.Rlimit{{Resource: limits.Core}, {Resource: limits.CPU, Soft: 2, Hard: 3}}, Command: []string{"true"}},
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
		{"--status-fd", "4", "--stderr-fd", "5", "--gate-fd", "2", "--", "true"},
		{"--status-fd", "4", "--stderr-fd", "5", "--rlimits", "cpu=3:2", "--", "true"},
		{"--status-fd", "4", "--stderr-fd", "5", "--tun", "10.0.2.15/0", "--", "true"},
		{"--status-fd", "4", "--stderr-fd", "5", "--tun", "fd00::1/64=/s", "--", "true"},
		{"--status-fd", "4", "--stderr-fd", "5", "--tun", "10.0.2.15=/s", "--", "true"},
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

func TestRlimitsEncoding(t *testing.T) {
	const inf = limits.Infinity
	for _, rs := range [][]limits.Rlimit{
		nil,
		{rl(limits.Core, 0, 0)},
		{rl(limits.Core, 0, 0), rl(limits.NoFile, 64, 64), rl(limits.FSize, 1<<20, 1<<20), rl(limits.CPU, 2, 3), rl(limits.NProc, 50, 50), rl(limits.Data, 1, inf)},
		{rl(limits.NoFile, inf, inf)},
	} {
		s := encodeRlimits(rs)
		got, err := parseRlimits(s)
		if err != nil {
			t.Fatalf("parseRlimits(%q): %v", s, err)
		}
		if !reflect.DeepEqual(got, rs) {
			t.Errorf("round trip of %q: got %+v, want %+v", s, got, rs)
		}
	}
	if s := encodeRlimits([]limits.Rlimit{rl(limits.Core, 0, 0), rl(limits.NoFile, 64, 64), rl(limits.CPU, 2, 3), rl(limits.Data, 5, inf)}); s != "core=0,nofile=64,cpu=2:3,data=5:inf" {
		t.Errorf("encoding = %q", s)
	}
	for _, bad := range []string{",", "core", "core=", "core=-1", "core=+1", "core=0x10", "core=01", "bogus=1",
		"core=0,core=0", "cpu=3:2", "cpu=2:2", "nofile=18446744073709551615", "nofile=99999999999999999999",
		"nofile=1 ", " nofile=1", "nofile=1,", "cpu=1:2:3", "core=0\x00"} {
		if rs, err := parseRlimits(bad); !errors.Is(err, ErrUsage) {
			t.Errorf("parseRlimits(%q) = %+v, %v; want ErrUsage", bad, rs, err)
		}
	}
}

// TestExecArgs: the exec shim's command line carries the rlimits in the
// codec's form, then the path and the whole argv.
func TestExecArgs(t *testing.T) {
	got := ExecArgs([]limits.Rlimit{rl(limits.NoFile, 64, 64)}, "/usr/bin/env", []string{"env", "-i"})
	want := []string{ExecArg, "nofile=64", "/usr/bin/env", "env", "-i"}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("ExecArgs = %q, want %q", got, want)
	}
}

func FuzzParseRlimits(f *testing.F) {
	for _, s := range []string{"", "core=0", "core=0,nofile=64,cpu=2:3,data=5:inf", "cpu=3:2", "x=1"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		rs, err := parseRlimits(s)
		if err != nil {
			if rs != nil {
				t.Fatalf("both a result and an error for %q", s)
			}
			return
		}
		// Whatever parses is canonical: it encodes back to itself.
		if back := encodeRlimits(rs); back != s {
			t.Fatalf("parseRlimits(%q) re-encodes as %q", s, back)
		}
	})
}

func rl(r limits.Resource, soft, hard uint64) limits.Rlimit {
	return limits.Rlimit{Resource: r, Soft: soft, Hard: hard}
}

func TestParseStatus(t *testing.T) {
	text := "Name:\tsh\nUid:\t65534\t65534\t65534\t65534\nGid:\t100\t100\t100\t100\n" +
		"CapEff:\t0000000000000000\nCapBnd:\t000001ffffffffff\nNoNewPrivs:\t1\nSeccomp:\t2\nSeccomp_filters:\t1\n"
	rb := Readback{UID: -1, GID: -1, NoNewPrivs: -1, Seccomp: -1}
	rb.ParseStatus([]byte(text))
	want := Readback{UID: 65534, GID: 100, NoNewPrivs: 1, Seccomp: 2, CapEff: "0000000000000000", CapBnd: "000001ffffffffff"}
	if !reflect.DeepEqual(rb, want) {
		t.Errorf("ParseStatus = %+v, want %+v", rb, want)
	}
	// Missing fields keep their value; a torn last line is no field.
	rb = Readback{UID: -1, GID: -1, NoNewPrivs: -1, Seccomp: -1}
	rb.ParseStatus([]byte("Name:\tx\nUid:"))
	if rb.UID != -1 || rb.NoNewPrivs != -1 || rb.Seccomp != -1 {
		t.Errorf("ParseStatus of a file without the fields = %+v, want them unset", rb)
	}
	// The kernel's own file for this process.
	if runtime.GOOS != "linux" {
		return
	}
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		t.Fatal(err)
	}
	rb = Readback{UID: -1, GID: -1}
	rb.ParseStatus(b)
	if rb.UID != os.Getuid() || rb.GID != os.Getgid() || rb.CapBnd == "" {
		t.Errorf("ParseStatus(/proc/self/status) = %+v, want uid %d gid %d", rb, os.Getuid(), os.Getgid())
	}
}
