// Package sandboxtest gates tests that need the real kernel or a real
// bubblewrap, so that a machine that cannot run them says so.
//
// By default a missing prerequisite skips the test with the reason and the
// fix. With SANDBOX_REQUIRE=1 in the environment (CI sets it) the same call
// fails the test instead: a run that could not exercise the sandbox has
// verified nothing and must not pass.
package sandboxtest

import (
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/user"
	"strconv"
	"strings"
	"testing"

	llsys "github.com/landlock-lsm/go-landlock/landlock/syscall"
)

// RequireEnv is the variable that turns every skip of this package into a
// failure.
const RequireEnv = "SANDBOX_REQUIRE"

// Required reports whether SANDBOX_REQUIRE=1 is set.
func Required() bool { return os.Getenv(RequireEnv) == "1" }

// Unavailable skips t, or fails it under SANDBOX_REQUIRE=1, naming what is
// missing and how to provide it.
func Unavailable(t testing.TB, what, fix string) {
	t.Helper()
	if Required() {
		t.Fatalf("%s unavailable under %s=1: %s", what, RequireEnv, fix)
	}
	t.Skipf("%s unavailable: %s (set %s=1 to make this a failure)", what, fix, RequireEnv)
}

// Bwrap returns the absolute path of a bubblewrap that can create the
// namespaces sandbox-run asks for, or skips (fails under SANDBOX_REQUIRE=1).
func Bwrap(t testing.TB) string {
	t.Helper()
	path, err := exec.LookPath("bwrap")
	if err != nil {
		Unavailable(t, "bwrap", "install bubblewrap (apt-get install -y bubblewrap)")
		return ""
	}
	out, err := exec.Command(path, "--unshare-user", "--unshare-pid", "--unshare-net",
		"--ro-bind", "/", "/", "--", "/bin/true").CombinedOutput()
	if err != nil {
		Unavailable(t, "bwrap namespaces", "bwrap cannot create namespaces here: "+
			string(out)+" (enable unprivileged user namespaces)")
		return ""
	}
	return path
}

// Root skips unless the test runs as uid 0, SANDBOX_REQUIRE=1 or not: it
// is for a case that only exists when sandbox-run runs as root, which an
// unprivileged CI pass skips by design.
func Root(t testing.TB) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("needs root: the case or its fixture (a network namespace, a mount) exists only for uid 0; the root CI lane runs it")
	}
}

// NonRoot skips unless the test runs as a user other than uid 0.
func NonRoot(t testing.TB) {
	t.Helper()
	if os.Geteuid() == 0 {
		t.Skip("needs an unprivileged user: this case only exists when sandbox-run runs as non-root")
	}
}

// CurrentUser returns the name of the user running the test, for messages.
func CurrentUser() string {
	u, err := user.Current()
	if err != nil {
		return "?"
	}
	return u.Username
}

// ErrUnavailable marks a prerequisite that is absent, for helpers that
// return errors rather than taking a testing.TB.
var ErrUnavailable = errors.New("sandboxtest: prerequisite unavailable")

// WorkDir returns a new directory that a sandbox can use as its workdir:
// under /tmp, reachable by everyone, and, when the test runs as root, owned
// by the uid the sandbox runs as (65534). It is removed when the test ends.
func WorkDir(t testing.TB) string {
	t.Helper()
	d, err := os.MkdirTemp("/tmp", "sbx-test-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(d) })
	if err := os.Chmod(d, 0o755); err != nil {
		t.Fatal(err)
	}
	if os.Geteuid() == 0 {
		if err := os.Chown(d, 65534, 65534); err != nil {
			t.Fatal(err)
		}
	}
	return d
}

// Chown gives p to the sandbox's uid when the test runs as root, so that a
// file or directory a test made is the sandbox's own.
func Chown(t testing.TB, p string) {
	t.Helper()
	if os.Geteuid() == 0 {
		if err := os.Lchown(p, 65534, 65534); err != nil {
			t.Fatal(err)
		}
	}
}

// RequireCgroupEnv turns a missing delegated cgroup v2 (with the memory and
// pids controllers) into a failure. It is separate from RequireEnv because
// many hosts that run bwrap fine cannot offer one (a hybrid hierarchy whose
// memory and pids controllers sit on cgroup v1), and sandbox-run falls back
// to rlimits plus sampling there, which the other tests cover.
const RequireCgroupEnv = "SANDBOX_REQUIRE_CGROUP"

// CgroupUnavailable skips t, or fails it under SANDBOX_REQUIRE_CGROUP=1.
func CgroupUnavailable(t testing.TB, what, why string) {
	t.Helper()
	if os.Getenv(RequireCgroupEnv) == "1" {
		t.Fatalf("%s unavailable under %s=1: %s", what, RequireCgroupEnv, why)
	}
	t.Skipf("%s unavailable: %s (set %s=1 to make this a failure)", what, why, RequireCgroupEnv)
}

// Variables that make test-vm sets in its virtual machine, each turning
// the skip of the tests that need that kernel setting into a failure
// (KernelUnavailable). They are separate from RequireEnv because CI's own
// host cannot offer these settings: the VM lane does.
const (
	RequireYamaEnv      = "SANDBOX_REQUIRE_YAMA"       // the Yama LSM (kernel.yama.ptrace_scope exists)
	RequireUsernsOffEnv = "SANDBOX_REQUIRE_USERNS_OFF" // user namespaces disabled by a sysctl
	// A kernel whose Landlock ABI is below the design's minimum
	// (landlock.MinABI): Debian 12's 6.1 has ABI 2.
	RequireOldLandlockEnv = "SANDBOX_REQUIRE_OLD_LANDLOCK"
	// A kernel that answers int $0x80 from a 64-bit process (the i386
	// system-call gate): some hypervisors' guests fault on it instead.
	RequireI386GateEnv = "SANDBOX_REQUIRE_I386_GATE"
)

// KernelUnavailable skips t, or fails it when the variable env is "1",
// naming the kernel setting the test needs and where it runs (make test-vm
// boots a kernel that has it).
func KernelUnavailable(t testing.TB, env, what, why string) {
	t.Helper()
	if os.Getenv(env) == "1" {
		t.Fatalf("%s unavailable under %s=1: %s", what, env, why)
	}
	t.Skipf("%s unavailable: %s (make test-vm runs this test on a kernel that has it; %s=1 makes this a failure)", what, why, env)
}

// BinEnv names a sandbox-run binary that BuildSandboxRun copies instead of
// building one: make test-vm sets it, as its virtual machine has test
// binaries but no time to compile.
const BinEnv = "SANDBOX_RUN_TEST_BIN"

// BuildSandboxRun builds cmd/sandbox-run and cmd/sandbox-run-init as make
// build does (the second's Go build ID stamped into the first, so that
// runs needing an init use it: sandbox.InitBinary), or copies the binary
// $SANDBOX_RUN_TEST_BIN names and the sandbox-run-init beside it, if any,
// into a new directory under /tmp that the sandbox's uid can reach, for
// suites that run the binary as users do. cleanup removes it. It is meant
// for TestMain, before m.Run.
func BuildSandboxRun(prefix string) (bin string, cleanup func(), err error) {
	dir, err := os.MkdirTemp("/tmp", prefix)
	if err != nil {
		return "", nil, err
	}
	cleanup = func() { os.RemoveAll(dir) }
	os.Chmod(dir, 0o755)
	bin = dir + "/sandbox-run"
	if prebuilt := os.Getenv(BinEnv); prebuilt != "" {
		err := copyExecutable(prebuilt, bin)
		if err == nil {
			if _, serr := os.Stat(prebuilt + "-init"); serr == nil {
				err = copyExecutable(prebuilt+"-init", bin+"-init")
			}
		}
		if err != nil {
			cleanup()
			return "", nil, fmt.Errorf("%s: %w", BinEnv, err)
		}
		return bin, cleanup, nil
	}
	if err := buildPair(bin); err != nil {
		cleanup()
		return "", nil, err
	}
	return bin, cleanup, nil
}

// buildPair builds sandbox-run-init, then sandbox-run as bin with the
// first's build ID stamped in (bin + "-init" is its path).
func buildPair(bin string) error {
	if err := goBuild(bin+"-init", "cmd/sandbox-run-init"); err != nil {
		return err
	}
	id, err := goBuildID(bin + "-init")
	if err != nil {
		return err
	}
	return goBuild(bin, "cmd/sandbox-run", "-ldflags", "-X "+module+"/internal/cli.InitBuildID="+id)
}

// BuildInit builds cmd/sandbox-run-init into a new directory under /tmp
// that the sandbox's uid can reach (and no run writes), removed when the
// test ends, and returns its path and Go build ID: the fields of a
// sandbox.InitBinary.
func BuildInit(t testing.TB) (path, buildID string) {
	t.Helper()
	dir, err := os.MkdirTemp("/tmp", "sbx-init-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	os.Chmod(dir, 0o755)
	path = dir + "/sandbox-run-init"
	if err := goBuild(path, "cmd/sandbox-run-init"); err != nil {
		t.Fatalf("go build sandbox-run-init: %v", err)
	}
	if buildID, err = goBuildID(path); err != nil {
		t.Fatal(err)
	}
	return path, buildID
}

const module = "github.com/sandbox-run/sandbox-run"

// goBuild builds the module's package pkg as out, static as make build
// builds it, by import path, so that a test package at any depth can.
func goBuild(out, pkg string, flags ...string) error {
	c := exec.Command("go", append(append([]string{"build"}, flags...), "-o", out, module+"/"+pkg)...)
	c.Env = append(os.Environ(), "CGO_ENABLED=0")
	c.Stderr = os.Stderr
	return c.Run()
}

// goBuildID is the Go build ID of the binary at path, as go tool buildid
// prints it.
func goBuildID(path string) (string, error) {
	out, err := exec.Command("go", "tool", "buildid", path).Output()
	if err != nil {
		return "", fmt.Errorf("sandboxtest: go tool buildid %s: %w", path, err)
	}
	return strings.TrimSpace(string(out)), nil
}

// PrivateUserDirs points XDG_CACHE_HOME, XDG_STATE_HOME and XDG_CONFIG_HOME
// at new directories of this test binary's own, so that the sandbox-run
// it runs (in process or as a binary) keeps its bwrap cache, journals and
// configuration apart from every other package's run: go test runs
// packages in parallel, and a run sweeps the journals of runs that are
// gone, which another package's killed run is (issue 19 item 7). The
// variables are set for the whole process; it is meant for TestMain,
// before m.Run. cleanup removes the directories.
func PrivateUserDirs(prefix string) (cleanup func(), err error) {
	dir, err := os.MkdirTemp("", prefix)
	if err != nil {
		return nil, err
	}
	cleanup = func() { os.RemoveAll(dir) }
	for _, v := range []struct{ env, sub string }{
		{"XDG_CACHE_HOME", "cache"}, {"XDG_STATE_HOME", "state"}, {"XDG_CONFIG_HOME", "config"},
	} {
		d := dir + "/" + v.sub
		if err := os.Mkdir(d, 0o700); err != nil {
			cleanup()
			return nil, err
		}
		os.Setenv(v.env, d)
	}
	return cleanup, nil
}

// CopyExecutable copies the file src to dst, mode 0755 whatever the
// umask, and fails t if it cannot.
func CopyExecutable(t testing.TB, src, dst string) {
	t.Helper()
	if err := copyExecutable(src, dst); err != nil {
		t.Fatal(err)
	}
}

// copyExecutable copies the file src to dst, mode 0755.
func copyExecutable(src, dst string) error {
	b, err := os.ReadFile(src)
	if err != nil {
		return fmt.Errorf("sandboxtest: %w", err)
	}
	if err := os.WriteFile(dst, b, 0o755); err != nil {
		return err
	}
	return os.Chmod(dst, 0o755) // whatever the umask: the sandbox's uid runs it
}

// SocketInode leaves a Unix socket's inode at p, as a service that bound
// it does: the listener is closed, the inode stays (connect() to it is
// refused, but its file type is a socket's).
func SocketInode(t testing.TB, p string) {
	t.Helper()
	l, err := net.ListenUnix("unix", &net.UnixAddr{Name: p, Net: "unix"})
	if err != nil {
		t.Fatal(err)
	}
	l.SetUnlinkOnClose(false)
	l.Close()
}

// Runsc returns the absolute path of a gVisor runsc that can start a
// sandbox here (`runsc --network=none do true`, with --rootless when the
// test is not root), or skips (fails under SANDBOX_REQUIRE=1).
func Runsc(t testing.TB) string {
	t.Helper()
	path, err := exec.LookPath("runsc")
	if err != nil {
		Unavailable(t, "runsc", "install gVisor (apt-get install -y runsc, or make deps)")
		return ""
	}
	args := []string{"--network=none", "--ignore-cgroups"}
	if os.Geteuid() != 0 {
		args = append(args, "--rootless")
	}
	state, err := os.MkdirTemp("", "sbx-runsc-probe-")
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(state)
	args = append(args, "--root", state, "do", "true")
	if out, err := exec.Command(path, args...).CombinedOutput(); err != nil {
		Unavailable(t, "runsc sandboxes", "runsc cannot start a sandbox here: "+string(out))
		return ""
	}
	return path
}

// Landlock returns the kernel's Landlock ABI version when it is at least
// min, or skips (fails under SANDBOX_REQUIRE=1).
func Landlock(t testing.TB, min int) int {
	t.Helper()
	v, err := llsys.LandlockGetABIVersion()
	if err != nil || v < min {
		Unavailable(t, "Landlock", "a kernel with Landlock ABI "+strconv.Itoa(min)+" or newer, with landlock in the lsm= list")
		return 0
	}
	return v
}
