package sandboxrun_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestInstallDepsModes: "install-deps.sh run" (make demo) installs what
// running needs and no test-only package; with no argument (make test,
// .ci/run) it installs the test packages too. The package manager is a
// stub that records what it was asked.
func TestInstallDepsModes(t *testing.T) {
	for _, c := range []struct {
		name      string
		args      []string
		have      []string // commands present besides the stubs
		want, not []string
	}{
		{"run, runtime present", []string{"run"}, []string{"bwrap", "runsc"}, nil, []string{"install"}},
		{"run, bwrap missing", []string{"run"}, []string{"runsc"}, []string{"install -y -qq bubblewrap"}, []string{"podman", "debootstrap", "runc", "uidmap"}},
		{"test (CI), default", nil, []string{"bwrap", "runsc"}, []string{"podman", "runc", "debootstrap", "uidmap"}, nil},
		{"test, named", []string{"test"}, []string{"bwrap", "runsc"}, []string{"podman", "debootstrap"}, nil},
	} {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			log := filepath.Join(dir, "apt.log")
			stub := func(name, body string) {
				if err := os.WriteFile(filepath.Join(dir, name), []byte("#!/bin/sh\n"+body+"\n"), 0o755); err != nil {
					t.Fatal(err)
				}
			}
			stub("apt-get", `echo "$@" >> '`+log+`'`)
			stub("id", "echo 0")
			for _, h := range c.have {
				stub(h, "true")
			}
			cmd := exec.Command("/bin/sh", append([]string{"scripts/install-deps.sh"}, c.args...)...)
			cmd.Env = []string{"PATH=" + dir}
			out, err := cmd.CombinedOutput()
			if err != nil && !strings.Contains(c.name, "bwrap missing") {
				t.Fatalf("%v: %s", err, out)
			}
			b, _ := os.ReadFile(log)
			for _, w := range c.want {
				if !strings.Contains(string(b), w) {
					t.Errorf("apt-get was not asked for %q; it got:\n%s", w, b)
				}
			}
			for _, n := range c.not {
				if strings.Contains(string(b), n) {
					t.Errorf("apt-get was asked for %q:\n%s", n, b)
				}
			}
		})
	}
	// make demo asks for the run mode, make test for everything.
	for target, want := range map[string]string{"demo": "scripts/install-deps.sh run\n", "test": "scripts/install-deps.sh\n"} {
		out, err := exec.Command("make", "-n", target).Output()
		if err != nil {
			t.Fatalf("make -n %s: %v", target, err)
		}
		if !strings.Contains(string(out), want) {
			t.Errorf("make %s does not run %q:\n%s", target, want, out)
		}
	}
}
