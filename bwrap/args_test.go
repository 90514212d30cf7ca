package bwrap

import (
	"bytes"
	"errors"
	"flag"
	"fmt"
	"os"
	"strings"
	"testing"

	"github.com/sandbox-run/sandbox-run/mount"
)

var update = flag.Bool("update", false, "rewrite golden files")

func sampleSpec() Spec {
	return Spec{
		AsPid1: true, UnshareCgroupTry: true, DisableUserns: true, UID: -1, GID: -1, Hostname: "sandbox",
		Mounts: []mount.Step{
			{Kind: mount.ROBind, Src: "/usr", Dst: "/usr", FD: 9},
			{Kind: mount.Symlink, Src: "usr/bin", Dst: "/bin", FD: -1},
			{Kind: mount.Proc, Dst: "/proc", FD: -1},
			{Kind: mount.ROBind, Src: "/proc/sys", Dst: "/proc/sys", FD: -1},
			{Kind: mount.Dev, Dst: "/dev", FD: -1},
			{Kind: mount.Tmpfs, Dst: "/tmp", Size: 1 << 20, FD: -1},
			{Kind: mount.Bind, Src: "/w", Dst: "/w", FD: 10},
			{Kind: mount.ROBind, Src: "/w/.git/hooks", Dst: "/w/.git/hooks", FD: -1},
			{Kind: mount.RemountRO, Dst: "/", FD: -1},
		},
		Chdir: "/w", ClearEnv: true, Env: []string{"HOME=/w", "TOKEN=s3cret"},
		SeccompFD: 8, InfoFD: 6, SizeOption: true,
	}
}

func TestArgsGolden(t *testing.T) {
	args, err := Args(sampleSpec())
	if err != nil {
		t.Fatal(err)
	}
	got := []byte(strings.Join(args, "\n") + "\n")
	const golden = "testdata/args.golden"
	if *update {
		os.WriteFile(golden, got, 0o644)
	}
	want, err := os.ReadFile(golden)
	if err != nil {
		t.Fatalf("%v (run go test ./bwrap -update)", err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("args differ from %s (go test ./bwrap -update to accept):\n%s", golden, got)
	}
}

func TestArgsFixedIsolation(t *testing.T) {
	// Whatever the Spec, the namespaces, capability drop and session are there.
	args, err := Args(Spec{UID: -1, GID: -1, SeccompFD: -1, InfoFD: -1})
	if err != nil {
		t.Fatal(err)
	}
	joined := " " + strings.Join(args, " ") + " "
	for _, want := range []string{"--unshare-user", "--unshare-pid", "--unshare-ipc", "--unshare-uts", "--unshare-net",
		"--cap-drop ALL", "--new-session", "--die-with-parent"} {
		if !strings.Contains(joined, " "+want+" ") {
			t.Errorf("args lack %s: %v", want, args)
		}
	}
}

// TestArgsNetMade: with NetMade, bwrap is not asked for a network
// namespace (the launcher made it) and every other fixed option stays;
// without it, it is (the control).
func TestArgsNetMade(t *testing.T) {
	for _, made := range []bool{false, true} {
		args, err := Args(Spec{UID: -1, GID: -1, SeccompFD: -1, InfoFD: -1, NetMade: made})
		if err != nil {
			t.Fatal(err)
		}
		joined := " " + strings.Join(args, " ") + " "
		if got := strings.Contains(joined, " --unshare-net "); got == made {
			t.Errorf("NetMade %v: --unshare-net present %v: %v", made, got, args)
		}
		for _, want := range []string{"--unshare-user", "--unshare-pid", "--unshare-ipc", "--unshare-uts", "--cap-drop ALL", "--new-session", "--die-with-parent"} {
			if !strings.Contains(joined, " "+want+" ") {
				t.Errorf("NetMade %v: args lack %s: %v", made, want, args)
			}
		}
	}
}

func TestArgsRefusesNUL(t *testing.T) {
	for _, tc := range []struct {
		name string
		s    Spec
	}{
		{"env value", Spec{Env: []string{"K=a\x00--bind"}}},
		{"env key", Spec{Env: []string{"K\x00=v"}}},
		{"bind source", Spec{Mounts: []mount.Step{{Kind: mount.ROBind, Src: "/a\x00b", Dst: "/a", FD: -1}}}},
		{"bind destination", Spec{Mounts: []mount.Step{{Kind: mount.Bind, Src: "/a", Dst: "/a\x00/etc", FD: -1}}}},
		{"bind-fd destination", Spec{Mounts: []mount.Step{{Kind: mount.ROBind, Src: "/a", Dst: "\x00", FD: 9}}}},
		{"symlink target", Spec{Mounts: []mount.Step{{Kind: mount.Symlink, Src: "usr/bin\x00", Dst: "/bin", FD: -1}}}},
		{"tmpfs", Spec{Mounts: []mount.Step{{Kind: mount.Tmpfs, Dst: "/tmp\x00", FD: -1}}}},
		{"proc", Spec{Mounts: []mount.Step{{Kind: mount.Proc, Dst: "/proc\x00", FD: -1}}}},
		{"dev", Spec{Mounts: []mount.Step{{Kind: mount.Dev, Dst: "/dev\x00", FD: -1}}}},
		{"remount", Spec{Mounts: []mount.Step{{Kind: mount.RemountRO, Dst: "\x00/", FD: -1}}}},
		{"dir", Spec{Mounts: []mount.Step{{Kind: mount.Dir, Dst: "/d\x00", FD: -1}}}},
		{"chdir", Spec{Chdir: "/w\x00"}},
		{"hostname", Spec{Hostname: "sand\x00box"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := tc.s
			s.UID, s.GID, s.SeccompFD, s.InfoFD = -1, -1, -1, -1
			args, err := Args(s)
			if !errors.Is(err, ErrNUL) {
				t.Fatalf("Args(%+v) = %q, %v; want an error wrapping ErrNUL", s, args, err)
			}
			if strings.Contains(err.Error(), "--bind") || strings.Contains(err.Error(), "=a") {
				t.Fatalf("error %q repeats the value", err)
			}
		})
	}
	if _, err := Args(Spec{UID: -1, GID: -1, SeccompFD: -1, InfoFD: -1, Env: []string{"NOEQUALS"}}); err == nil {
		t.Error("Args accepted an env entry without =")
	}
	if _, err := Args(Spec{UID: -1, GID: -1, SeccompFD: -1, InfoFD: -1, Mounts: []mount.Step{{Kind: mount.Dir, Dst: "/a", FD: -1}, {Kind: mount.Kind(99), FD: -1}}}); err == nil || !strings.Contains(err.Error(), "mount 1:") {
		t.Errorf("Args with an unknown mount kind = %v, want an error naming mount 1", err)
	}
}

func TestEncode(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string // "" with wantIdx >= 0: refused
		idx  int    // index named in the error, -1 = accepted
	}{
		{nil, "", -1},
		{[]string{"--a", "b"}, "--a\x00b\x00", -1},
		{[]string{""}, "\x00", -1},
		{[]string{"", ""}, "\x00\x00", -1},
		{[]string{"a b", "\xff\n"}, "a b\x00\xff\n\x00", -1},
		{[]string{"--bind", "/a\x00--bind", "/"}, "", 1},
		{[]string{"\x00"}, "", 0},
		{[]string{"ok", "ok", "x\x00", "y\x00"}, "", 2},
	} {
		got, err := Encode(tc.args)
		if tc.idx < 0 {
			if err != nil || string(got) != tc.want {
				t.Errorf("Encode(%q) = %q, %v; want %q", tc.args, got, err, tc.want)
			}
			continue
		}
		if !errors.Is(err, ErrNUL) || got != nil || !strings.Contains(err.Error(), fmt.Sprintf("argument %d:", tc.idx)) {
			t.Errorf("Encode(%q) = %q, %v; want nil and an error wrapping ErrNUL naming argument %d", tc.args, got, err, tc.idx)
		}
	}
}

func TestRedact(t *testing.T) {
	args, _ := Args(sampleSpec())
	red := strings.Join(Redact(args), " ")
	if strings.Contains(red, "s3cret") || !strings.Contains(red, "--setenv TOKEN <redacted>") {
		t.Errorf("Redact left the value or lost the name: %s", red)
	}
}

func BenchmarkArgs(b *testing.B) {
	s := sampleSpec()
	for i := 0; i < 100; i++ {
		s.Mounts = append(s.Mounts, mount.Step{Kind: mount.ROBind, Src: "/opt/x", Dst: "/opt/x", FD: -1})
	}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := Args(s); err != nil {
			b.Fatal(err)
		}
	}
}
