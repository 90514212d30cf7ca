package apparmor

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// fakeParser is a stand-in for apparmor_parser, named as a fake: no
// Ubuntu kernel is reachable where these tests run. It logs its
// arguments, and with -r FILE it "loads" FILE by adding its profiles to
// the fake root's kernel list, as the kernel would list them; mode
// "refuse" makes it fail like a parse error, "lie" makes it succeed
// without loading anything.
const fakeParser = `#!/bin/sh
# FAKE apparmor_parser for sandbox-run's tests
echo "$*" >> "%[1]s/parser.log"
[ "$1" = "-r" ] && [ -f "$2" ] || { echo "fake apparmor_parser: usage" >&2; exit 2; }
case "%[2]s" in
refuse) echo "AppArmor parser error for $2 in profile $2 at line 6: syntax error" >&2; exit 1;;
lie) exit 0;;
esac
grep -q '^profile unpriv_bwrap' "$2" || { echo "fake apparmor_parser: no unpriv_bwrap in $2" >&2; exit 1; }
printf 'bwrap (enforce)\nunpriv_bwrap (enforce)\n' >> "%[1]s/sys/kernel/security/apparmor/profiles"
`

// fakeRoot builds a fake Ubuntu host under a temporary directory: its
// os-release, the sysctl, Ubuntu's profile in extra-profiles (the
// testdata excerpt), /usr/bin/bwrap, an empty kernel list and the fake
// apparmor_parser (mode "", "refuse" or "lie").
func fakeRoot(t *testing.T, osRelease, mode string) string {
	t.Helper()
	root := t.TempDir()
	put := func(p, data string, perm os.FileMode) {
		full := filepath.Join(root, p)
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(full, []byte(data), perm); err != nil {
			t.Fatal(err)
		}
	}
	put("/etc/os-release", osRelease, 0o644)
	put(SysctlPath, "1\n", 0o644)
	put(SourcePath, string(testdata(t, "bwrap-userns-restrict")), 0o644)
	put(BwrapPath, "", 0o755)
	put(LoadedPath, "/usr/sbin/cupsd (enforce)\n", 0o644)
	put("/usr/sbin/apparmor_parser", fmt.Sprintf(fakeParser, root, mode), 0o755)
	if err := os.MkdirAll(filepath.Join(root, profileDir, "disable"), 0o755); err != nil {
		t.Fatal(err)
	}
	return root
}

const (
	ubuntu2404 = "PRETTY_NAME=\"Ubuntu 24.04.1 LTS\"\nNAME=\"Ubuntu\"\nVERSION_ID=\"24.04\"\nID=ubuntu\nID_LIKE=debian\n"
	debian12   = "PRETTY_NAME=\"Debian GNU/Linux 12 (bookworm)\"\nNAME=\"Debian GNU/Linux\"\nVERSION_ID=\"12\"\nID=debian\n"
)

// readAsRoot is ReadHost with the fake root standing for a host where
// setup runs as root, whoever runs the test.
func readAsRoot(root string) Host {
	h := ReadHost(root)
	h.Euid = 0
	return h
}

func parserLog(t *testing.T, root string) []string {
	b, err := os.ReadFile(filepath.Join(root, "parser.log"))
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		t.Fatal(err)
	}
	return strings.Split(strings.TrimSpace(string(b)), "\n")
}

func TestReadHost(t *testing.T) {
	root := fakeRoot(t, ubuntu2404, "")
	os.WriteFile(filepath.Join(root, profileDir, "bwrap"), testdata(t, "unconfined-bwrap"), 0o644)
	os.WriteFile(filepath.Join(root, profileDir, "usr.bin.flatpak"), []byte("profile flatpak /usr/bin/flatpak {\n  /usr/bin/bwrap px,\n}\n"), 0o644)
	h := ReadHost(root)
	if h.OSRelease["ID"] != "ubuntu" || h.OSRelease["VERSION_ID"] != "24.04" || h.Restrict != 1 {
		t.Errorf("os-release %v, restrict %d", h.OSRelease, h.Restrict)
	}
	if h.SourceErr != nil || !errors.Is(h.InstalledErr, fs.ErrNotExist) || h.InstalledLink || h.Disabled {
		t.Errorf("source %v, installed %v, link %v, disabled %v", h.SourceErr, h.InstalledErr, h.InstalledLink, h.Disabled)
	}
	if !slices.Equal(h.Conflicts, []string{"/etc/apparmor.d/bwrap"}) {
		t.Errorf("conflicts %v, want only the hand-written profile", h.Conflicts)
	}
	if h.Parser != "/usr/sbin/apparmor_parser" || !h.Bwrap || h.Loaded["/usr/sbin/cupsd"] != "enforce" {
		t.Errorf("parser %q, bwrap %v, loaded %v", h.Parser, h.Bwrap, h.Loaded)
	}

	// The same host with the profile a symlink, disabled, no sysctl, no
	// os-release at /etc (the fallback in /usr/lib is read).
	os.Symlink("/dev/null", filepath.Join(root, ProfilePath))
	os.WriteFile(filepath.Join(root, DisabledPath), nil, 0o644)
	os.Remove(filepath.Join(root, SysctlPath))
	os.Rename(filepath.Join(root, "etc/os-release"), filepath.Join(root, "usr/lib/os-release"))
	h = ReadHost(root)
	if !h.InstalledLink || !h.Disabled || h.Restrict != -1 || h.OSRelease["ID"] != "ubuntu" {
		t.Errorf("link %v, disabled %v, restrict %d, os-release %v", h.InstalledLink, h.Disabled, h.Restrict, h.OSRelease)
	}
}

// TestSetupFakeUbuntu is the positive control of the whole flow on a fake
// root: Ubuntu's file is copied byte for byte, the (fake) parser loads
// it, and a second run finds everything in place and does nothing.
func TestSetupFakeUbuntu(t *testing.T) {
	ctx := context.Background()
	root := fakeRoot(t, ubuntu2404, "")
	p, err := Decide(root, readAsRoot(root), false)
	if err != nil {
		t.Fatal(err)
	}
	done, err := Apply(ctx, root, p, ExecRunner)
	if err != nil {
		t.Fatalf("Apply: %v (done %v)", err, done)
	}
	dst := filepath.Join(root, ProfilePath)
	got, err := os.ReadFile(dst)
	if err != nil || string(got) != string(testdata(t, "bwrap-userns-restrict")) {
		t.Fatalf("installed profile is not Ubuntu's file: %v", err)
	}
	if fi, _ := os.Stat(dst); fi.Mode().Perm() != 0o644 {
		t.Errorf("mode %v, want 0644", fi.Mode().Perm())
	}
	if log := parserLog(t, root); !slices.Equal(log, []string{"-r " + dst}) {
		t.Errorf("parser calls %q, want one: -r %s", log, dst)
	}
	if ok, err := ProfileLoaded(root); !ok || err != nil {
		t.Errorf("ProfileLoaded = %v, %v", ok, err)
	}
	if len(done) != 3 || !strings.HasPrefix(done[0], "wrote "+dst) {
		t.Errorf("done = %q", done)
	}
	ents, _ := os.ReadDir(filepath.Join(root, profileDir))
	if len(ents) != 2 { // disable/ and the profile: no temporary file left
		t.Errorf("%s holds %v", profileDir, ents)
	}

	// Idempotent: nothing to write, nothing to run.
	p, err = Decide(root, readAsRoot(root), false)
	if err != nil || len(p.Steps) != 0 {
		t.Fatalf("second Decide = %v, %v; want no steps", p.Steps, err)
	}
	if done, err := Apply(ctx, root, p, ExecRunner); err != nil || len(done) != 0 {
		t.Errorf("second Apply = %q, %v", done, err)
	}
	if log := parserLog(t, root); len(log) != 1 {
		t.Errorf("the parser ran again: %q", log)
	}
}

// TestSetupFakeDebian: the same fake host but Debian is refused before
// anything is written or run.
func TestSetupFakeDebian(t *testing.T) {
	root := fakeRoot(t, debian12, "")
	_, err := Decide(root, readAsRoot(root), false)
	if !errors.Is(err, ErrRefused) || !strings.Contains(err.Error(), "ID=debian") {
		t.Fatalf("Decide = %v, want a refusal naming ID=debian", err)
	}
	if _, err := os.Lstat(filepath.Join(root, ProfilePath)); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("a profile was written: %v", err)
	}
}

func TestApplyFailures(t *testing.T) {
	ctx := context.Background()
	for _, tt := range []struct{ mode, want string }{
		{"refuse", "syntax error"},
		{"lie", "does not hold bwrap and unpriv_bwrap"},
	} {
		t.Run(tt.mode, func(t *testing.T) {
			root := fakeRoot(t, ubuntu2404, tt.mode)
			p, err := Decide(root, readAsRoot(root), false)
			if err != nil {
				t.Fatal(err)
			}
			done, err := Apply(ctx, root, p, ExecRunner)
			if !errors.Is(err, ErrRefused) || !strings.Contains(err.Error(), tt.want) || !strings.Contains(err.Error(), "; fix: ") {
				t.Fatalf("Apply = %v, want a failure naming %q", err, tt.want)
			}
			if _, err := os.Lstat(filepath.Join(root, ProfilePath)); !errors.Is(err, fs.ErrNotExist) {
				t.Errorf("the profile stays after a failed load: %v (done %q)", err, done)
			}
			if len(parserLog(t, root)) != 1 {
				t.Errorf("parser calls %q", parserLog(t, root))
			}
		})
	}
	t.Run("file appeared meanwhile", func(t *testing.T) {
		root := fakeRoot(t, ubuntu2404, "")
		p, err := Decide(root, readAsRoot(root), false)
		if err != nil {
			t.Fatal(err)
		}
		dst := filepath.Join(root, ProfilePath)
		os.WriteFile(dst, []byte("mine"), 0o644)
		if _, err := Apply(ctx, root, p, ExecRunner); err == nil || !strings.Contains(err.Error(), "appeared") {
			t.Errorf("Apply = %v, want a refusal", err)
		}
		if b, _ := os.ReadFile(dst); string(b) != "mine" {
			t.Errorf("the file that appeared was replaced")
		}
		if log := parserLog(t, root); len(log) != 0 {
			t.Errorf("the parser ran: %q", log)
		}
	})
}
