package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sandbox-run/sandbox-run/internal/apparmor"
	"github.com/sandbox-run/sandbox-run/internal/sandboxtest"
)

// TestSetupRefusesThisHost runs sandbox-run setup for real on this
// machine (Debian here, not Ubuntu): refused with the distribution named,
// as root or not, dry run or not, and nothing written to /etc/apparmor.d.
func TestSetupRefusesThisHost(t *testing.T) {
	b, err := os.ReadFile("/etc/os-release")
	if err != nil {
		t.Fatal(err)
	}
	id := apparmor.ParseOSRelease(b)["ID"]
	if id == "ubuntu" {
		// On Ubuntu the real run would change the host; the refusal of
		// another distribution is held by TestSetupFakeRoots there.
		t.Logf("this host is Ubuntu: setup is not run for real here")
		return
	}
	_, before := os.Lstat(apparmor.ProfilePath)
	for _, args := range [][]string{{"setup"}, {"setup", "--dry-run"}} {
		r := run(t, "", args...)
		oneLine(t, r, "setup refuses", "(ID="+id+")", "only installs Ubuntu's own bwrap-userns-restrict profile", "fix: nothing to install")
		if r.stdout != "" {
			t.Errorf("%v: stdout %q", args, r.stdout)
		}
	}
	if _, after := os.Lstat(apparmor.ProfilePath); errors.Is(before, fs.ErrNotExist) != errors.Is(after, fs.ErrNotExist) {
		t.Errorf("%s: before %v, after %v", apparmor.ProfilePath, before, after)
	}
}

// fakeUbuntu builds a fake root (setup's hidden, test-only --root) of an
// Ubuntu 24.04 host with the restriction on, Ubuntu's profile in
// extra-profiles (an excerpt), and a FAKE apparmor_parser that logs its
// arguments and "loads" a profile by listing it in the fake kernel list.
// No Ubuntu kernel is reachable here.
func fakeUbuntu(t *testing.T, osRelease string) string {
	t.Helper()
	root := sandboxtest.WorkDir(t)
	profile, err := os.ReadFile("../internal/apparmor/testdata/bwrap-userns-restrict")
	if err != nil {
		t.Fatal(err)
	}
	parser := fmt.Sprintf(`#!/bin/sh
# FAKE apparmor_parser
echo "$*" >> %[1]s/parser.log
[ "$1" = "-r" ] && grep -q '^profile unpriv_bwrap' "$2" || exit 1
printf 'bwrap (enforce)\nunpriv_bwrap (enforce)\n' >> %[1]s/sys/kernel/security/apparmor/profiles
`, root)
	for p, data := range map[string]string{
		"/etc/os-release":            osRelease,
		apparmor.SysctlPath:          "1\n",
		apparmor.SourcePath:          string(profile),
		apparmor.BwrapPath:           "",
		apparmor.LoadedPath:          "",
		"/usr/sbin/apparmor_parser":  parser,
		"/etc/apparmor.d/tunables/x": "",
	} {
		full := filepath.Join(root, p)
		mustMkdir(t, filepath.Dir(full))
		if err := os.WriteFile(full, []byte(data), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	return root
}

// TestSetupFakeRoots runs the binary on fake roots: the dry run prints
// every file and command and changes nothing; as root the fake Ubuntu
// gets Ubuntu's file and one (fake) parser call, and a second run does
// nothing; a fake Debian is refused.
func TestSetupFakeRoots(t *testing.T) {
	root := fakeUbuntu(t, "ID=ubuntu\nVERSION_ID=\"24.04\"\nPRETTY_NAME=\"Ubuntu 24.04.1 LTS\"\n")
	dst := filepath.Join(root, apparmor.ProfilePath)
	log := filepath.Join(root, "parser.log")

	r := run(t, "", "setup", "--root", root, "--dry-run")
	for _, want := range []string{
		"would write " + dst + " (mode 0644, ",
		"a copy of " + filepath.Join(root, apparmor.SourcePath),
		"would run " + filepath.Join(root, "/usr/sbin/apparmor_parser") + " -r " + dst + "\n",
		"kernel.apparmor_restrict_unprivileged_userns = 1",
		"dry run: nothing written, nothing run",
	} {
		if r.code != 0 || !strings.Contains(r.stdout, want) {
			t.Errorf("dry run: exit %d, stdout lacks %q:\n%s%s", r.code, want, r.stdout, r.stderr)
		}
	}
	if _, err := os.Lstat(dst); err == nil {
		t.Errorf("the dry run wrote %s", dst)
	}
	if _, err := os.Lstat(log); err == nil {
		t.Errorf("the dry run ran the parser")
	}

	r = run(t, "", "setup", "--root", root)
	if os.Geteuid() != 0 {
		oneLine(t, r, "setup needs root", "sudo sandbox-run setup")
		if _, err := os.Lstat(dst); err == nil {
			t.Errorf("refused, yet %s was written", dst)
		}
		t.Logf("not root: the install itself is held by the apparmor package's fake-root tests")
	} else {
		if r.code != 0 || !strings.Contains(r.stdout, "wrote "+dst) || !strings.Contains(r.stdout, "enforce mode") {
			t.Fatalf("exit %d:\n%s%s", r.code, r.stdout, r.stderr)
		}
		got, _ := os.ReadFile(dst)
		want, _ := os.ReadFile(filepath.Join(root, apparmor.SourcePath))
		if len(got) == 0 || string(got) != string(want) {
			t.Errorf("%s is not a copy of Ubuntu's file", dst)
		}
		r = run(t, "", "setup", "--root", root)
		if r.code != 0 || !strings.Contains(r.stdout, "nothing to do") {
			t.Errorf("second run: exit %d:\n%s%s", r.code, r.stdout, r.stderr)
		}
		if b, _ := os.ReadFile(log); string(b) != "-r "+dst+"\n" {
			t.Errorf("parser calls %q, want exactly one", b)
		}
	}

	debian := fakeUbuntu(t, "ID=debian\nVERSION_ID=\"12\"\nPRETTY_NAME=\"Debian GNU/Linux 12 (bookworm)\"\n")
	oneLine(t, run(t, "", "setup", "--root", debian), "Debian GNU/Linux 12 (bookworm) (ID=debian)", "fix:")
	if _, err := os.Lstat(filepath.Join(debian, apparmor.ProfilePath)); err == nil {
		t.Errorf("the fake Debian got a profile")
	}
}

// TestAppArmorSignatureNamesSetup: bwrap's AppArmor failure with the
// restriction on makes run's refusal and check's fix name sandbox-run
// setup. Both halves are FAKES, as no Ubuntu kernel is reachable here: a
// fake bwrap prints the message, and in a private mount namespace a tmpfs
// over /proc/sys/kernel holds kernel.apparmor_restrict_unprivileged_userns
// = 1 (and the boot id run needs). The contrast, the same fake bwrap on
// the real /proc/sys (no restriction), must not name setup.
func TestAppArmorSignatureNamesSetup(t *testing.T) {
	sandboxtest.Root(t) // mounting a tmpfs over /proc/sys/kernel
	unshare, err := exec.LookPath("unshare")
	if err != nil {
		sandboxtest.Unavailable(t, "unshare (util-linux)", "apt-get install util-linux")
	}
	fake := fakeBwrap(t, "bwrap: setting up uid map: Permission denied")
	// check looks bwrap up on PATH by that name.
	onPath := sandboxtest.WorkDir(t)
	if err := os.Symlink(fake, filepath.Join(onPath, "bwrap")); err != nil {
		t.Fatal(err)
	}
	w := sandboxtest.WorkDir(t)
	sandboxtest.Chown(t, w)
	const restrict = `b=$(cat /proc/sys/kernel/random/boot_id) && mount -t tmpfs tmpfs /proc/sys/kernel &&
mkdir /proc/sys/kernel/random && echo "$b" > /proc/sys/kernel/random/boot_id &&
printf 1 > /proc/sys/kernel/apparmor_restrict_unprivileged_userns && exec "$@"`
	call := func(restricted bool, args ...string) result {
		ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
		defer cancel()
		c := exec.CommandContext(ctx, bin, args...)
		if restricted {
			c = exec.CommandContext(ctx, unshare, append([]string{"--mount", "--propagation", "private", "--", "sh", "-c", restrict, "sh", bin}, args...)...)
		}
		c.Env = append(os.Environ(), "PATH="+onPath+":"+os.Getenv("PATH"))
		var o, e bytes.Buffer
		c.Stdout, c.Stderr = &o, &e
		err := c.Run()
		var ee *exec.ExitError
		if err != nil && !errors.As(err, &ee) {
			t.Fatal(err)
		}
		return result{o.String(), e.String(), c.ProcessState.ExitCode()}
	}
	for _, restricted := range []bool{true, false} {
		r := call(restricted, "run", "--bwrap", fake, "--workdir", w, "--", "true")
		oneLine(t, r, "setting up uid map")
		if got := strings.Contains(r.stderr, "fix: as root, sandbox-run setup"); got != restricted {
			t.Errorf("restriction %v: run names setup = %v: %s", restricted, got, r.stderr)
		}
		r = call(restricted, "check", "--json")
		var rep struct {
			Checks []struct{ ID, Status, Remediation string }
		}
		if err := json.Unmarshal([]byte(r.stdout), &rep); err != nil {
			t.Fatalf("check --json: %v: %s%s", err, r.stdout, r.stderr)
		}
		seen := 0
		for _, c := range rep.Checks {
			if c.ID != "sandbox" && c.ID != "userns" {
				continue
			}
			seen++
			if got := strings.Contains(c.Remediation, "sandbox-run setup"); got != restricted {
				t.Errorf("restriction %v: check's %s (%s) names setup = %v: %q", restricted, c.ID, c.Status, got, c.Remediation)
			}
			if c.ID == "sandbox" && c.Status != "fail" {
				t.Errorf("restriction %v: the sandbox check is %s with a failing bwrap", restricted, c.Status)
			}
		}
		if seen != 2 {
			t.Errorf("check --json lacks the userns or sandbox entry: %s", r.stdout)
		}
	}
}
