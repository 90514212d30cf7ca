package gvisor

import (
	"encoding/json"
	"errors"
	"flag"
	"os"
	"path/filepath"
	"reflect"
	"testing"

	"github.com/sandbox-run/sandbox-run/mount"
)

var update = flag.Bool("update", false, "rewrite the golden files")

// plan is a mount plan as internal/plan's plan.New makes it for bwrap, in its
// order: system paths, /proc and its entries, own mounts, --read, the
// writable dirs, protected paths, then the late remounts.
func plan() []mount.Step {
	return []mount.Step{
		{Kind: mount.ROBind, Src: "/usr", Dst: "/usr", FD: -1},
		{Kind: mount.Symlink, Src: "usr/bin", Dst: "/bin", FD: -1},
		{Kind: mount.ROBind, Src: "/etc", Dst: "/etc", FD: -1},
		{Kind: mount.Proc, Dst: "/proc", FD: -1},
		{Kind: mount.ROBind, Src: "/proc/sys", Dst: "/proc/sys", FD: -1},
		{Kind: mount.Tmpfs, Dst: "/proc/acpi", FD: -1, Size: 4096},
		{Kind: mount.RemountRO, Dst: "/proc/acpi", FD: -1},
		{Kind: mount.ROBind, Src: "/dev/null", Dst: "/proc/kcore", FD: -1},
		{Kind: mount.Dev, Dst: "/dev", FD: -1},
		{Kind: mount.Tmpfs, Dst: "/dev/shm", FD: -1, Size: 64 << 20},
		{Kind: mount.Tmpfs, Dst: "/tmp", FD: -1, Size: 256 << 20},
		{Kind: mount.ROBind, Src: "/srv/data", Dst: "/srv/data", FD: -1},
		{Kind: mount.ROBind, Src: "/dev/null", Dst: "/srv/data/agent.sock", FD: -1},
		{Kind: mount.Bind, Src: "/home/u/proj", Dst: "/home/u/proj", FD: -1},
		{Kind: mount.Bind, Src: "/home/u/proj/.git", Dst: "/home/u/proj/.git", FD: -1},
		{Kind: mount.ROBind, Src: "/home/u/proj/.git/config", Dst: "/home/u/proj/.git/config", FD: -1},
		{Kind: mount.ROBind, Src: "/run/x/egress.sock", Dst: "/run/sandbox-run/egress.sock", FD: 12},
		{Kind: mount.RemountRO, Dst: "/dev", FD: -1},
		{Kind: mount.RemountRO, Dst: "/", FD: -1},
	}
}

func input() Input {
	return Input{
		Args: []string{"/run/sandbox-run/init", "__sandbox-init", "--", "npx", "server"},
		Env:  []string{"HTTP_PROXY=http://127.0.0.1:3128", "PATH=/usr/bin:/bin"},
		Cwd:  "/home/u/proj", UID: 65534, GID: 65534,
		Mounts:  plan(),
		Rlimits: []Rlimit{{Type: "RLIMIT_NOFILE", Hard: 1024, Soft: 1024}},
		Rootfs:  "rootfs", Empty: "/run/b/empty",
		Files: map[string]bool{"/home/u/proj/.git/config": true, "/run/sandbox-run/egress.sock": true},
	}
}

func TestRenderGolden(t *testing.T) {
	for _, tc := range []struct {
		name string
		in   func() Input
	}{
		{"full", input},
		{"minimal", func() Input {
			in := input()
			in.Mounts = []mount.Step{{Kind: mount.ROBind, Src: "/usr", Dst: "/usr", FD: -1}, {Kind: mount.Bind, Src: "/w", Dst: "/w", FD: -1}}
			in.Rlimits, in.Files, in.Cwd = nil, nil, "/w"
			return in
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b, err := Render(tc.in())
			if err != nil {
				t.Fatal(err)
			}
			got, err := json.MarshalIndent(struct {
				Spec   Spec
				Points []Point
			}{b.Spec, b.Points}, "", "  ")
			if err != nil {
				t.Fatal(err)
			}
			golden := filepath.Join("testdata", tc.name+".golden.json")
			if *update {
				if err := os.WriteFile(golden, append(got, '\n'), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			want, err := os.ReadFile(golden)
			if err != nil {
				t.Fatal(err)
			}
			if string(want) != string(got)+"\n" {
				t.Errorf("%s differs; got:\n%s", golden, got)
			}
		})
	}
}

// TestRenderHolds checks the rules the golden files show, one by one, so
// that an -update cannot quietly accept a weaker spec.
func TestRenderHolds(t *testing.T) {
	b, err := Render(input())
	if err != nil {
		t.Fatal(err)
	}
	s := b.Spec
	if !s.Root.Readonly || !s.Process.NoNewPrivileges || len(s.Process.Capabilities.Bounding) != 0 {
		t.Errorf("root readonly %v, no_new_privs %v, bounding %v", s.Root.Readonly, s.Process.NoNewPrivileges, s.Process.Capabilities.Bounding)
	}
	byDst := map[string]Mount{}
	for _, m := range s.Mounts {
		if m.Source != "proc" && (m.Destination == "/proc" || len(m.Destination) > 6 && m.Destination[:6] == "/proc/") && m.Type == "bind" {
			t.Errorf("host /proc entry bound in: %+v", m)
		}
		byDst[m.Destination] = m
	}
	for dst, want := range map[string][]string{
		"/usr": {"rbind", "ro"}, "/srv/data": {"rbind", "ro"}, "/home/u/proj": {"rbind", "rw"},
		"/home/u/proj/.git/config": {"rbind", "ro"}, "/run/sandbox-run/egress.sock": {"rbind", "ro"},
	} {
		if !reflect.DeepEqual(byDst[dst].Options, want) {
			t.Errorf("%s: options %v, want %v", dst, byDst[dst].Options, want)
		}
	}
	if m := byDst["/srv/data/agent.sock"]; m.Source != "/run/b/empty" {
		t.Errorf("socket cover: source %q, want the bundle's empty file", m.Source)
	}
	if m := byDst["/tmp"]; !reflect.DeepEqual(m.Options, []string{"nosuid", "nodev", "mode=1777", "size=268435456"}) {
		t.Errorf("/tmp: %+v", m)
	}
	if _, ok := byDst["/dev"]; ok {
		t.Error("/dev rendered: gVisor mounts its own")
	}
	// Protected paths after the writable dir that holds them: runsc
	// applies mounts in order, so the other way round would cover them.
	idx := func(d string) int {
		for i, m := range s.Mounts {
			if m.Destination == d {
				return i
			}
		}
		return -1
	}
	if !(idx("/home/u/proj") < idx("/home/u/proj/.git") && idx("/home/u/proj/.git") < idx("/home/u/proj/.git/config")) {
		t.Error("protected paths are not mounted after their writable dir")
	}
	pts := map[string]Point{}
	for _, p := range b.Points {
		pts[p.Path] = p
	}
	if pts["/bin"].Link != "usr/bin" || !pts["/usr"].Dir || pts["/run/sandbox-run/egress.sock"].Dir || pts["/srv/data/agent.sock"].Dir {
		t.Errorf("points: %+v", b.Points)
	}
}

func TestRenderRefuses(t *testing.T) {
	for name, mut := range map[string]func(*Input){
		"nul in arg": func(in *Input) { in.Args = append(in.Args, "a\x00b") },
		"nul in env": func(in *Input) { in.Env = append(in.Env, "A=\x00") },
		"deep link": func(in *Input) {
			in.Mounts = append(in.Mounts, mount.Step{Kind: mount.Symlink, Src: "x", Dst: "/a/b"})
		},
		"relative dst": func(in *Input) { in.Mounts = append(in.Mounts, mount.Step{Kind: mount.Bind, Src: "/x", Dst: "x"}) },
		"unclean dst": func(in *Input) {
			in.Mounts = append(in.Mounts, mount.Step{Kind: mount.Bind, Src: "/x", Dst: "/a/../b"})
		},
		"unknown kind": func(in *Input) { in.Mounts = append(in.Mounts, mount.Step{Kind: 99, Dst: "/x"}) },
		"nul in mount": func(in *Input) {
			in.Mounts = append(in.Mounts, mount.Step{Kind: mount.Bind, Src: "/x\x00", Dst: "/x"})
		},
	} {
		t.Run(name, func(t *testing.T) {
			in := input()
			if _, err := Render(in); err != nil {
				t.Fatalf("control: the unchanged input fails: %v", err)
			}
			mut(&in)
			if _, err := Render(in); !errors.Is(err, ErrLayout) {
				t.Errorf("err = %v, want ErrLayout", err)
			}
		})
	}
}

func TestRunscArgs(t *testing.T) {
	for _, tc := range []struct {
		r    Runsc
		want []string
	}{
		{Runsc{Root: "/r"}, []string{"runsc", "--root", "/r", "--network", "none", "--ignore-cgroups", "run", "id"}},
		{Runsc{Root: "/r", Rootless: true, HostUDS: true, Platform: "systrap", Log: "/l"},
			[]string{"runsc", "--root", "/r", "--network", "none", "--ignore-cgroups", "--rootless", "--host-uds", "open", "--platform", "systrap", "--log", "/l", "run", "id"}},
	} {
		if got := tc.r.Args("runsc", "run", "id"); !reflect.DeepEqual(got, tc.want) {
			t.Errorf("%+v: %q, want %q", tc.r, got, tc.want)
		}
	}
}

func TestParseVersion(t *testing.T) {
	v, err := ParseVersion("runsc version 0.0~20221219.0\nspec: 1.0.2-dev\n")
	if err != nil || v.Release != "0.0~20221219.0" || v.Spec != "1.0.2-dev" {
		t.Errorf("%+v, %v", v, err)
	}
	for _, bad := range []string{"", "bwrap 0.8.0", "spec: 1.0"} {
		if _, err := ParseVersion(bad); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
}

func TestDefaultPlatform(t *testing.T) {
	for out, want := range map[string]string{
		"  -pid-file string\n  -platform string\n    \tspecifies which platform to use: ptrace (default), kvm. (default \"ptrace\")\n": "ptrace",
		"  -platform string\n    \tspecifies which platform to use: systrap (default), kvm. (default \"systrap\")\n":                   "systrap",
		"  -platform string\n    \tno default here\n":     "",
		"  -platform string":                              "",
		"  -network value\n    \t(default \"sandbox\")\n": "",
		"  -platform string\n    \t(default \"a b\")\n":   "",
	} {
		if got := DefaultPlatform(out); got != want {
			t.Errorf("%q: %q, want %q", out, got, want)
		}
	}
}

// TestRenderDeepLinks: a link below the first level is made only in a
// directory the bundle makes itself, never under a bind (where it would
// be hidden) or a missing parent.
func TestRenderDeepLinks(t *testing.T) {
	dir := mount.Step{Kind: mount.Dir, Dst: "/run", FD: -1}
	link := mount.Step{Kind: mount.Symlink, Src: "../x", Dst: "/run/link", FD: -1}
	b, err := Render(Input{Mounts: []mount.Step{dir, link}, Rootfs: "rootfs", Empty: "/e"})
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for _, p := range b.Points {
		found = found || p == Point{Path: "/run/link", Link: "../x"}
	}
	if !found {
		t.Errorf("points %v lack /run/link", b.Points)
	}
	for name, ms := range map[string][]mount.Step{
		"under a bind":   {{Kind: mount.ROBind, Src: "/img/run", Dst: "/run", FD: -1}, link},
		"missing parent": {link},
	} {
		if _, err := Render(Input{Mounts: ms, Rootfs: "rootfs", Empty: "/e"}); !errors.Is(err, ErrLayout) {
			t.Errorf("%s: %v, want ErrLayout", name, err)
		}
	}
}

// TestRenderNetAdmin checks that transparent egress's capability is
// init's alone: CAP_NET_ADMIN effective and permitted, never bounding,
// inheritable or ambient (no execve can carry or regain it), and absent
// without NetAdmin.
func TestRenderNetAdmin(t *testing.T) {
	in := input()
	b, err := Render(in)
	if err != nil {
		t.Fatal(err)
	}
	if c := b.Spec.Process.Capabilities; len(c.Effective)+len(c.Permitted) != 0 {
		t.Errorf("without NetAdmin: capabilities %+v, want none", c)
	}
	in.NetAdmin = true
	if b, err = Render(in); err != nil {
		t.Fatal(err)
	}
	c := b.Spec.Process.Capabilities
	want := []string{"CAP_NET_ADMIN"}
	if !reflect.DeepEqual(c.Effective, want) || !reflect.DeepEqual(c.Permitted, want) {
		t.Errorf("with NetAdmin: effective %v permitted %v, want %v", c.Effective, c.Permitted, want)
	}
	if len(c.Bounding)+len(c.Inheritable)+len(c.Ambient) != 0 {
		t.Errorf("with NetAdmin: bounding %v inheritable %v ambient %v, want empty", c.Bounding, c.Inheritable, c.Ambient)
	}
}
