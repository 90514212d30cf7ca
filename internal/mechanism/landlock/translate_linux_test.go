package landlock

import (
	"reflect"
	"testing"

	llrules "github.com/sandbox-run/sandbox-run/landlock"
	"github.com/sandbox-run/sandbox-run/mount"
)

func ro(src, dst string) mount.Step {
	return mount.Step{Kind: mount.ROBind, Src: src, Dst: dst, FD: -1}
}
func rw(src, dst string) mount.Step            { return mount.Step{Kind: mount.Bind, Src: src, Dst: dst, FD: -1} }
func step(k mount.Kind, dst string) mount.Step { return mount.Step{Kind: k, Dst: dst, FD: -1} }

// TestTranslate: each kind of step becomes the grant, or the named
// Unheld, that it stands for under Landlock; the cases the plan
// fixtures of TestTranslateGolden do not reach are here.
func TestTranslate(t *testing.T) {
	facts := Facts{Files: map[string]bool{"/srv/f": true, "/w/f": true}, DevWrite: []string{"/dev/null"}, DevRead: []string{"/dev/urandom"}, Tmp: "/tmp/run"}
	for _, tc := range []struct {
		name   string
		steps  []mount.Step
		want   llrules.Input
		unheld map[string][]string // Unheld paths by kind (unheldKey)
	}{
		{"read dir and file", []mount.Step{ro("/srv", "/srv"), ro("/srv/f", "/srv/f"), ro("/opt", "/opt")},
			llrules.Input{ReadDirs: []string{"/srv", "/opt"}}, nil},
		{"read file alone", []mount.Step{ro("/srv/f", "/srv/f")}, llrules.Input{ReadFiles: []string{"/srv/f"}}, nil},
		{"write beneath a read grant adds", []mount.Step{ro("/srv", "/srv"), rw("/srv/out", "/srv/out")},
			llrules.Input{ReadDirs: []string{"/srv"}, WriteDirs: []string{"/srv/out"}}, nil},
		{"write file", []mount.Step{rw("/w/f", "/w/f")}, llrules.Input{WriteFiles: []string{"/w/f"}}, nil},
		{"read-only beneath a write grant is held by copies", []mount.Step{rw("/w", "/w"), ro("/w/.bashrc", "/w/.bashrc")},
			llrules.Input{WriteDirs: []string{"/w"}}, map[string][]string{"held": {"/w/.bashrc"}}},
		{"read-only over a write grant", []mount.Step{rw("/w/sub", "/w/sub"), ro("/w", "/w")},
			llrules.Input{ReadDirs: []string{"/w"}, WriteDirs: []string{"/w/sub"}}, map[string][]string{"over": {"/w"}}},
		{"pinned beneath a write grant", []mount.Step{rw("/w", "/w"), rw("/w/.git", "/w/.git")},
			llrules.Input{WriteDirs: []string{"/w"}}, map[string][]string{"pinned": {"/w/.git"}}},
		{"covers", []mount.Step{ro("/srv", "/srv"), ro("/dev/null", "/srv/s.sock"), ro("/dev/null", "/srv/s.sock"), ro("/dev/null", "/proc/keys")},
			llrules.Input{ReadDirs: []string{"/srv"}}, map[string][]string{"covered": {"/srv/s.sock"}, "procHidden": {"/proc/keys"}}},
		{"moved", []mount.Step{ro("/opt/tool-1", "/opt/tool"), rw("/var/cache/x", "/cache")},
			llrules.Input{ReadDirs: []string{"/opt/tool-1"}, WriteDirs: []string{"/var/cache/x"}},
			map[string][]string{"moved": {"/opt/tool <- /opt/tool-1", "/cache <- /var/cache/x"}}},
		{"proc", []mount.Step{step(mount.Proc, "/proc"), ro("/proc/sys", "/proc/sys"), {Kind: mount.Tmpfs, Dst: "/proc/acpi", FD: -1, Size: 4096}, step(mount.RemountRO, "/proc/acpi")},
			llrules.Input{ReadDirs: []string{"/proc"}}, map[string][]string{"proc": {"/proc"}, "procHidden": {"/proc/acpi"}}},
		{"dev and tmpfs", []mount.Step{step(mount.Dev, "/dev"), {Kind: mount.Tmpfs, Dst: "/dev/shm", FD: -1, Size: 64}, {Kind: mount.Tmpfs, Dst: "/tmp", FD: -1}, step(mount.Tmpfs, "/var/empty"), step(mount.RemountRO, "/dev")},
			llrules.Input{ReadFiles: []string{"/dev/urandom"}, WriteDirs: []string{"/tmp/run"}, WriteFiles: []string{"/dev/null"}},
			map[string][]string{"dev": {"/dev"}, "shm": {"/dev/shm size=64"}, "tmp": {"/tmp -> /tmp/run"}, "tmpfs": {"/var/empty"}}},
		{"symlink, remount and dir", []mount.Step{{Kind: mount.Symlink, Src: "usr/bin", Dst: "/bin", FD: -1}, step(mount.RemountRO, "/"), step(mount.Dir, "/run/x")},
			llrules.Input{}, map[string][]string{"dir": {"/run/x"}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			in, unheld := translate(tc.steps, facts)
			if !reflect.DeepEqual(in, tc.want) {
				t.Errorf("input:\n got %+v\nwant %+v", in, tc.want)
			}
			got := map[string][]string{}
			for _, u := range unheld {
				got[unheldKey(t, u)] = u.Paths
			}
			if len(got) != len(tc.unheld) || (len(got) > 0 && !reflect.DeepEqual(got, tc.unheld)) {
				t.Errorf("unheld:\n got %v\nwant %v", got, tc.unheld)
			}
		})
	}
}

// unheldKey names u's kind for the table.
func unheldKey(t *testing.T, u Unheld) string {
	names := map[int]string{unheldHeld: "held", unheldPinned: "pinned", unheldOver: "over", unheldCovered: "covered",
		unheldProcHidden: "procHidden", unheldProc: "proc", unheldDev: "dev", unheldTmp: "tmp", unheldShm: "shm",
		unheldTmpfs: "tmpfs", unheldMoved: "moved", unheldDir: "dir"}
	for k, txt := range unheldText {
		if txt.what == u.What && txt.name == u.Name {
			return names[k]
		}
	}
	t.Fatalf("unknown unheld %+v", u)
	return ""
}
