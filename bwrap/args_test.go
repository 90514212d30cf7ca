package bwrap

import (
	"bytes"
	"flag"
	"os"
	"strings"
	"testing"
)

var update = flag.Bool("update", false, "rewrite golden files")

func sampleSpec() Spec {
	return Spec{
		AsPid1: true, UnshareCgroupTry: true, DisableUserns: true, UID: -1, GID: -1, Hostname: "sandbox",
		Mounts: []Mount{
			{Kind: ROBind, Src: "/usr", Dst: "/usr", FD: 9},
			{Kind: Symlink, Src: "usr/bin", Dst: "/bin", FD: -1},
			{Kind: Proc, Dst: "/proc", FD: -1},
			{Kind: ROBind, Src: "/proc/sys", Dst: "/proc/sys", FD: -1},
			{Kind: Dev, Dst: "/dev", FD: -1},
			{Kind: Tmpfs, Dst: "/tmp", Size: 1 << 20, FD: -1},
			{Kind: Bind, Src: "/w", Dst: "/w", FD: 10},
			{Kind: ROBind, Src: "/w/.git/hooks", Dst: "/w/.git/hooks", FD: -1},
			{Kind: RemountRO, Dst: "/", FD: -1},
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

func TestArgsRefusesNUL(t *testing.T) {
	for _, s := range []Spec{
		{Env: []string{"K=a\x00--bind"}},
		{Mounts: []Mount{{Kind: ROBind, Src: "/a\x00b", Dst: "/a", FD: -1}}},
		{Chdir: "/w\x00"},
	} {
		s.UID, s.GID, s.SeccompFD, s.InfoFD = -1, -1, -1, -1
		if _, err := Args(s); err == nil {
			t.Errorf("Args(%+v) accepted a NUL byte", s)
		}
	}
	if _, err := Args(Spec{UID: -1, GID: -1, SeccompFD: -1, InfoFD: -1, Env: []string{"NOEQUALS"}}); err == nil {
		t.Error("Args accepted an env entry without =")
	}
}

func TestRedactAndEncode(t *testing.T) {
	args, _ := Args(sampleSpec())
	red := strings.Join(Redact(args), " ")
	if strings.Contains(red, "s3cret") || !strings.Contains(red, "--setenv TOKEN <redacted>") {
		t.Errorf("Redact left the value or lost the name: %s", red)
	}
	enc := Encode([]string{"--a", "b"})
	if string(enc) != "--a\x00b\x00" {
		t.Errorf("Encode = %q", enc)
	}
}

func BenchmarkArgs(b *testing.B) {
	s := sampleSpec()
	for i := 0; i < 100; i++ {
		s.Mounts = append(s.Mounts, Mount{Kind: ROBind, Src: "/opt/x", Dst: "/opt/x", FD: -1})
	}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := Args(s); err != nil {
			b.Fatal(err)
		}
	}
}
