package bwrap

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestDiagnose(t *testing.T) {
	ubuntu := Host{MaxUserNamespaces: 15000, UnprivilegedUsernsClone: 1, AppArmorRestrictUserns: 1}
	plain := Host{MaxUserNamespaces: 15000, UnprivilegedUsernsClone: -1, AppArmorRestrictUserns: -1}
	// What sandbox-run reads inside Debian's podman with its defaults.
	podman := Host{MaxUserNamespaces: 15000, UnprivilegedUsernsClone: 1, AppArmorRestrictUserns: -1, Seccomp: 2,
		ProcCovered: "/proc/bus, /proc/fs, /proc/irq, /proc/sys, /proc/acpi, /proc/keys, /proc/timer_list"}
	tests := []struct {
		name   string
		stderr string
		host   Host
		want   []string // substrings of the one line
	}{
		{"apparmor uid map", "bwrap: setting up uid map: Permission denied\n", ubuntu, []string{"AppArmor", "apparmor_restrict_unprivileged_userns=1", "fix: as root, sandbox-run setup", "bwrap-userns-restrict", "never an unconfined"}},
		{"apparmor RTM_NEWADDR", "bwrap: loopback: Failed RTM_NEWADDR: Operation not permitted\n", ubuntu, []string{"AppArmor", "fix: as root, sandbox-run setup"}},
		{"uid map without apparmor", "bwrap: setting up uid map: Permission denied\n", plain, []string{"refused", "fix:"}},
		{"userns disabled", "bwrap: Creating new namespace failed: Resource temporarily unavailable\n", Host{MaxUserNamespaces: 0, UnprivilegedUsernsClone: -1}, []string{"max_user_namespaces is 0", "fix:"}},
		{"debian clone off", "bwrap: No permissions to creating new namespace, likely because the kernel does not allow non-privileged user namespaces.\n", Host{MaxUserNamespaces: 100, UnprivilegedUsernsClone: 0}, []string{"unprivileged_userns_clone is 0", "fix:"}},
		{"container seccomp (bwrap 0.8 wording)", "bwrap: No permissions to create new namespace, likely because the kernel does not allow non-privileged user namespaces.\n", Host{MaxUserNamespaces: 15000, UnprivilegedUsernsClone: 1, AppArmorRestrictUserns: -1, Seccomp: 2}, []string{"seccomp filter", "container", "--security-opt seccomp=unconfined", "fix:"}},
		{"container seccomp", "bwrap: Creating new namespace failed: Operation not permitted\n", Host{MaxUserNamespaces: 15000, UnprivilegedUsernsClone: -1, AppArmorRestrictUserns: -1, Seccomp: 2}, []string{"seccomp filter", "--security-opt seccomp="}},
		{"sysctl before seccomp", "bwrap: Creating new namespace failed: Operation not permitted\n", Host{MaxUserNamespaces: 0, UnprivilegedUsernsClone: -1, Seccomp: 2}, []string{"max_user_namespaces is 0"}},
		{"podman: sethostname refused by its profile", "bwrap: Can't set hostname to sandbox: Operation not permitted\n", podman, []string{"sethostname without CAP_SYS_ADMIN", "--security-opt seccomp=unconfined", "--security-opt unmask=ALL", "--sandbox landlock", "fix:"}},
		{"podman: proc mount under masked paths", "bwrap: Can't mount proc on /newroot/proc: Operation not permitted\n", podman, []string{"/proc/acpi", "proc mount", "--security-opt unmask=ALL", "systempaths=unconfined", "--sandbox landlock"}},
		{"hostname refused, no filter: not blamed on a container", "bwrap: Can't set hostname to sandbox: Operation not permitted\n", plain, []string{"bwrap said", "--dry-run"}},
		{"proc mount refused, /proc uncovered: not blamed on masks", "bwrap: Can't mount proc on /newroot/proc: Operation not permitted\n", plain, []string{"bwrap said", "--dry-run"}},
		{"no filter: not blamed on one", "bwrap: No permissions to create new namespace, likely because the kernel does not allow non-privileged user namespaces.\n", plain, []string{"could not create namespaces", "enable unprivileged user namespaces"}},
		{"missing source", "bwrap: Can't find source path /x: No such file or directory\n", plain, []string{"mount", "fix:"}},
		{"silent", "", plain, []string{"printed nothing", "fix:"}},
		{"other", "bwrap: something new\n", plain, []string{"something new", "fix:"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := Diagnose(tt.stderr, 1, tt.host)
			if !errors.Is(err, ErrSetup) {
				t.Fatalf("Diagnose = %v, not ErrSetup", err)
			}
			msg := err.Error()
			if strings.Contains(msg, "\n") {
				t.Errorf("message is not one line: %q", msg)
			}
			for _, w := range tt.want {
				if !strings.Contains(msg, w) {
					t.Errorf("message %q lacks %q", msg, w)
				}
			}
		})
	}
}

// TestDiagnoseSetupOnlyForAppArmor: sandbox-run setup is named as the fix
// only where AppArmor's restriction is on; the same bwrap message on a
// host without it names other causes.
func TestDiagnoseSetupOnlyForAppArmor(t *testing.T) {
	for _, stderr := range []string{"bwrap: setting up uid map: Permission denied\n", "bwrap: loopback: Failed RTM_NEWADDR: Operation not permitted\n"} {
		for _, h := range []Host{
			{MaxUserNamespaces: 15000, UnprivilegedUsernsClone: -1, AppArmorRestrictUserns: -1},
			{MaxUserNamespaces: 15000, UnprivilegedUsernsClone: 1, AppArmorRestrictUserns: 0},
		} {
			if msg := Diagnose(stderr, 1, h).Error(); strings.Contains(msg, "sandbox-run setup") {
				t.Errorf("%q with apparmor_restrict_unprivileged_userns=%d names setup: %s", stderr, h.AppArmorRestrictUserns, msg)
			}
		}
		if msg := Diagnose(stderr, 1, Host{MaxUserNamespaces: 15000, UnprivilegedUsernsClone: 1, AppArmorRestrictUserns: 1}).Error(); !strings.Contains(msg, "sandbox-run setup") {
			t.Errorf("%q with the restriction on does not name setup: %s", stderr, msg)
		}
	}
}

func TestPreflight(t *testing.T) {
	if err := Preflight(Host{MaxUserNamespaces: 0, UnprivilegedUsernsClone: -1}); !errors.Is(err, ErrSetup) || !strings.Contains(err.Error(), "max_user_namespaces") {
		t.Errorf("max_user_namespaces=0: %v", err)
	}
	if err := Preflight(Host{MaxUserNamespaces: 10, UnprivilegedUsernsClone: 0}); !errors.Is(err, ErrSetup) || !strings.Contains(err.Error(), "unprivileged_userns_clone") {
		t.Errorf("unprivileged_userns_clone=0: %v", err)
	}
	if err := Preflight(Host{MaxUserNamespaces: 10, UnprivilegedUsernsClone: -1, AppArmorRestrictUserns: 1}); err != nil {
		t.Errorf("an AppArmor restriction alone must not refuse (bwrap may have its profile): %v", err)
	}
}

func TestReadHost(t *testing.T) {
	dir := t.TempDir()
	write := func(rel, v string) {
		p := filepath.Join(dir, rel)
		os.MkdirAll(filepath.Dir(p), 0o755)
		os.WriteFile(p, []byte(v+"\n"), 0o644)
	}
	write("sys/user/max_user_namespaces", "0")
	write("sys/kernel/apparmor_restrict_unprivileged_userns", "1")
	h := ReadHost(filepath.Join(dir, "sys"))
	if h != (Host{MaxUserNamespaces: 0, UnprivilegedUsernsClone: -1, AppArmorRestrictUserns: 1, Seccomp: -1}) {
		t.Errorf("ReadHost = %+v", h)
	}
	write("self/mountinfo", strings.Join([]string{
		"22 1 0:21 / /proc rw,nosuid - proc proc rw",
		"23 22 0:40 / /proc/sys/fs/binfmt_misc rw - binfmt_misc binfmt_misc rw",
		"24 22 0:21 /bus /proc/bus ro,nosuid - proc proc rw",
		"25 22 0:50 / /proc/acpi ro - tmpfs tmpfs ro",
		"26 1 0:51 / /procfoo rw - tmpfs tmpfs rw",
	}, "\n"))
	if h := ReadHost(filepath.Join(dir, "sys")); h.ProcCovered != "/proc/bus, /proc/acpi" {
		t.Errorf("ReadHost with self/mountinfo: ProcCovered = %q, want the masks, not /proc, binfmt_misc or /procfoo", h.ProcCovered)
	}
	write("self/status", "Name:\tx\nSeccomp:\t2\nSeccomp_filters:\t1")
	if h := ReadHost(filepath.Join(dir, "sys")); h.Seccomp != 2 {
		t.Errorf("ReadHost with self/status: Seccomp = %d, want 2", h.Seccomp)
	}
	// The same tree, Preflight's sysctls alone: the diagnosis-only fields
	// (AppArmor's restriction included) stay unread; ReadHost, the
	// control, read it above.
	if h := ReadSysctls(filepath.Join(dir, "sys")); h != (Host{MaxUserNamespaces: 0, UnprivilegedUsernsClone: -1, AppArmorRestrictUserns: -1, Seccomp: -1}) {
		t.Errorf("ReadSysctls = %+v, want Preflight's two sysctls, the rest -1 and no ProcCovered", h)
	}
	if h := ReadHost(filepath.Join(dir, "sys")); h.AppArmorRestrictUserns != 1 {
		t.Errorf("ReadHost: AppArmorRestrictUserns = %d, want 1", h.AppArmorRestrictUserns)
	}
}
