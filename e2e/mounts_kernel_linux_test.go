package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/sandbox-run/sandbox-run/internal/sandboxtest"
)

// rawBwrap runs sh -c script under bwrap with the mounts given and nothing
// of sandbox-run's: the naive launcher of the positive controls. It is
// bounded in time like every run of this package.
func rawBwrap(t *testing.T, script string, mounts ...string) (string, error) {
	t.Helper()
	bw := sandboxtest.Bwrap(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	args := append([]string{"--unshare-user", "--unshare-pid", "--unshare-net", "--die-with-parent"}, mounts...)
	args = append(args, "--", "/bin/sh", "-c", script)
	out, err := exec.CommandContext(ctx, bw, args...).CombinedOutput()
	return string(out), err
}

// ddScript writes 512 MiB into dir and prints what dd says.
func ddScript(dir string) string {
	return fmt.Sprintf("dd if=/dev/zero of=%s/fill bs=1M count=512 2>&1; echo rc=$?", dir)
}

// TestTmpfsCeilings: a 512 MiB write into /dev/shm and /tmp stops with
// ENOSPC at the default ceiling (64 MiB, 256 MiB) and at a flag's; the
// control, bwrap's own --dev and an unsized --tmpfs, takes all 512 MiB.
func TestTmpfsCeilings(t *testing.T) {
	needBwrap(t)
	const all = "536870912 bytes"
	for _, tt := range []struct {
		dir     string
		flags   []string
		written string
		control []string
	}{
		{"/dev/shm", nil, "67108864 bytes", []string{"--ro-bind", "/", "/", "--dev", "/dev"}},
		{"/dev/shm", []string{"--shm-size", "16M"}, "16777216 bytes", nil},
		{"/tmp", nil, "268435456 bytes", []string{"--ro-bind", "/", "/", "--dev", "/dev", "--tmpfs", "/tmp"}},
		{"/tmp", []string{"--tmp-size", "32M"}, "33554432 bytes", nil},
	} {
		t.Run(strings.Join(append([]string{tt.dir}, tt.flags...), " "), func(t *testing.T) {
			if tt.control != nil {
				out, err := rawBwrap(t, ddScript(tt.dir), tt.control...)
				if err != nil || !strings.Contains(out, all) || !strings.Contains(out, "rc=0") {
					t.Fatalf("control: 512 MiB into an unsized %s did not go through (untested): %v %q", tt.dir, err, out)
				}
			}
			w := sandboxtest.WorkDir(t)
			r := sandboxed(t, w, ddScript(tt.dir), tt.flags...)
			if !strings.Contains(r.stdout, "No space left on device") || !strings.Contains(r.stdout, tt.written) {
				t.Errorf("512 MiB into %s: want ENOSPC after %s; exit %d, %q %q", tt.dir, tt.written, r.code, r.stdout, r.stderr)
			}
		})
	}
}

// TestDevReadOnly: /dev itself (bwrap's tmpfs without a size, owned by the
// sandbox's uid) takes no file; the control, bwrap's --dev alone, does.
func TestDevReadOnly(t *testing.T) {
	needBwrap(t)
	const script = "echo x > /dev/planted && echo planted; echo y > /dev/null && echo null-ok"
	out, err := rawBwrap(t, script, "--ro-bind", "/", "/", "--dev", "/dev")
	if err != nil || !strings.Contains(out, "planted") {
		t.Fatalf("control: bwrap's /dev took no file (untested): %v %q", err, out)
	}
	r := sandboxed(t, sandboxtest.WorkDir(t), script)
	if strings.Contains(r.stdout, "planted") {
		t.Errorf("a file was written into /dev: %q", r.stdout)
	}
	if !strings.Contains(r.stderr, "Read-only file system") || !strings.Contains(r.stdout, "null-ok") {
		t.Errorf("want EROFS for /dev/planted and /dev/null still writable: %q %q", r.stdout, r.stderr)
	}
}

// TestTmpfsReport: the report names every tmpfs with its ceiling and how it
// is held, and the search of --read paths with what it cost.
func TestTmpfsReport(t *testing.T) {
	needBwrap(t)
	w := sandboxtest.WorkDir(t)
	rd := sandboxtest.WorkDir(t)
	rep := filepath.Join(sandboxtest.WorkDir(t), "r.json")
	r := run(t, "", "run", "--workdir", w, "--read", rd, "--shm-size", "8M", "--report", rep, "--", "true")
	if r.code != 0 {
		t.Fatalf("exit %d: %s", r.code, r.stderr)
	}
	var report struct {
		TmpSize int64 `json:"tmp_size"`
		Tmpfs   []struct {
			Path     string `json:"path"`
			Size     int64  `json:"size"`
			Enforced string `json:"enforced"`
		} `json:"tmpfs"`
		ReadScan *struct {
			Paths   int     `json:"paths"`
			Entries int     `json:"entries"`
			Seconds float64 `json:"seconds"`
		} `json:"read_scan"`
	}
	b, err := os.ReadFile(rep)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, &report); err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	for _, tf := range report.Tmpfs {
		got[tf.Path] = fmt.Sprintf("%d %s", tf.Size, tf.Enforced)
	}
	for path, want := range map[string]string{
		"/tmp": "268435456 tmpfs size=", "/dev/shm": "8388608 tmpfs size=", "/dev": "0 read-only", "/": "0 read-only",
	} {
		if !strings.HasPrefix(got[path], want) {
			t.Errorf("report tmpfs %s: %q, want %q...", path, got[path], want)
		}
	}
	if report.TmpSize != 256<<20 {
		t.Errorf("tmp_size %d", report.TmpSize)
	}
	if report.ReadScan == nil || report.ReadScan.Paths != 1 || report.ReadScan.Seconds <= 0 {
		t.Errorf("read_scan %+v, want 1 path and a measured time", report.ReadScan)
	}
}

// serveSocket listens on a Unix socket at p that anyone may connect to and
// counts the connections it accepts until the test ends.
func serveSocket(t *testing.T, p string) *atomic.Int32 {
	t.Helper()
	var n atomic.Int32
	sandboxtest.ServeUnix(t, p, func(net.Conn) { n.Add(1) })
	os.Chmod(p, 0o777)
	return &n
}

// waitAccepted returns n once it has reached want, or after 5 s: the
// client may have connected and exited before the accept loop counted
// its connection (the kernel completes a connection on the listen
// queue, without the server).
func waitAccepted(n *atomic.Int32, want int32) int32 {
	for i := 0; i < 500 && n.Load() < want; i++ {
		time.Sleep(10 * time.Millisecond)
	}
	return n.Load()
}

// serviceAt stands for a host service at sock and fifo: a socket anyone
// may connect to (serveSocket) and a FIFO held open by a reader until the
// test ends, so that a writer's open succeeds. It returns the socket's
// connection count and the script that tries both from inside.
func serviceAt(t *testing.T, sock, fifo string) (*atomic.Int32, string) {
	t.Helper()
	accepted := serveSocket(t, sock)
	if err := unix.Mkfifo(fifo, 0o666); err != nil {
		t.Fatal(err)
	}
	os.Chmod(fifo, 0o666)
	rfd, err := unix.Open(fifo, unix.O_RDONLY|unix.O_NONBLOCK|unix.O_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { unix.Close(rfd) })
	return accepted, connectScript(sock, fifo)
}

// systemBinds are the naive launcher's system: what the controls of the
// socket tests bind before the directory under test.
var systemBinds = []string{"--ro-bind", "/usr", "/usr", "--symlink", "usr/bin", "/bin", "--symlink", "usr/lib", "/lib",
	"--symlink", "usr/lib64", "/lib64", "--ro-bind", "/etc", "/etc", "--dev", "/dev"}

// connectScript tries the socket and the FIFO from inside, with perl
// (perl-base is part of every Debian system).
func connectScript(sock, fifo string) string {
	return fmt.Sprintf(`perl -MIO::Socket::UNIX -e 'IO::Socket::UNIX->new(Peer => "%s") ? print "connected\n" : print "connect: $!\n"'; `+
		`perl -MFcntl -e 'sysopen(my $f, "%s", O_WRONLY|O_NONBLOCK) ? print "fifo-open\n" : print "fifo: $!\n"'`, sock, fifo)
}

// TestReadSocketCovered: a socket and a FIFO under a --read directory (a
// service's docker.sock or ssh-agent) are usable through a read-only bind
// (the control, raw bwrap); under sandbox-run each has /dev/null over it.
func TestReadSocketCovered(t *testing.T) {
	needBwrap(t)
	d := sandboxtest.WorkDir(t)
	sub := filepath.Join(d, "svc")
	os.Mkdir(sub, 0o755)
	sock, fifo := filepath.Join(sub, "agent.sock"), filepath.Join(sub, "pipe")
	accepted, script := serviceAt(t, sock, fifo)

	out, err := rawBwrap(t, script, slices.Concat(systemBinds, []string{"--ro-bind", d, d})...)
	if err != nil || !strings.Contains(out, "connected") || !strings.Contains(out, "fifo-open") || waitAccepted(accepted, 1) == 0 {
		t.Fatalf("control: a read-only bind did not hand over the socket and FIFO (untested): %v %q, accepted %d", err, out, accepted.Load())
	}
	before := accepted.Load()
	rep := filepath.Join(sandboxtest.WorkDir(t), "r.json")
	r := sandboxed(t, sandboxtest.WorkDir(t), script, "--read", d, "--report", rep)
	if r.code != 0 {
		t.Fatalf("exit %d: %s", r.code, r.stderr)
	}
	if !strings.Contains(r.stdout, "connect: Connection refused") || !strings.Contains(r.stdout, "fifo: Permission denied") {
		t.Errorf("inside: %q, want the socket refused and the FIFO closed", r.stdout)
	}
	if n := accepted.Load(); n != before {
		t.Errorf("the service accepted %d connections from inside", n-before)
	}
	b, _ := os.ReadFile(rep)
	for _, p := range []string{sock, fifo} {
		if !strings.Contains(string(b), `"`+p+`"`) {
			t.Errorf("report does not list %s as covered: %s", p, b)
		}
	}
	if _, err := os.Lstat(sock); err != nil {
		t.Errorf("the host's socket is gone: %v", err)
	}
}

// TestReadRootRefused: --read / would lay the host's /tmp and /proc over the
// sandbox's own. The control, bwrap binding / after its own mounts (the
// order sandbox-run used), shows the host's /tmp file and the test's own
// host pid in /proc; sandbox-run refuses the bind.
func TestReadRootRefused(t *testing.T) {
	needBwrap(t)
	marker := filepath.Join(sandboxtest.WorkDir(t), "host-tmp-marker")
	if err := os.WriteFile(marker, []byte("HOST"), 0o644); err != nil {
		t.Fatal(err)
	}
	script := fmt.Sprintf("cat %s; test -d /proc/%d && echo host-proc", marker, os.Getpid())
	out, err := rawBwrap(t, script, "--proc", "/proc", "--dev", "/dev", "--tmpfs", "/tmp", "--ro-bind", "/", "/")
	if err != nil || !strings.Contains(out, "HOST") || !strings.Contains(out, "host-proc") {
		t.Fatalf("control: the naive order did not show the host's /tmp and /proc (untested): %v %q", err, out)
	}
	for _, read := range []string{"/", "/tmp", "/proc", "/proc/1", "/dev/shm", "/sys", "/run"} {
		r := sandboxed(t, sandboxtest.WorkDir(t), script, "--read", read)
		oneLine(t, r, "--read "+read, "fix:")
		if strings.Contains(r.stdout, "HOST") || strings.Contains(r.stdout, "host-proc") {
			t.Errorf("--read %s: the host's /tmp or /proc is visible: %q", read, r.stdout)
		}
	}
}

// TestWritableSocketCovered: a socket and a FIFO in the workdir (git's
// fsmonitor socket in .git/, a FIFO a host process reads) are usable
// through a writable bind (the control, raw bwrap); under sandbox-run each
// has /dev/null over it, cannot be removed from inside, and the report's
// write_scan lists it, while the rest of the workdir stays writable.
func TestWritableSocketCovered(t *testing.T) {
	needBwrap(t)
	w := sandboxtest.WorkDir(t)
	git := filepath.Join(w, ".git")
	if err := os.Mkdir(git, 0o755); err != nil {
		t.Fatal(err)
	}
	sandboxtest.Chown(t, git)
	sock, fifo := filepath.Join(git, "fsmonitor--daemon.ipc"), filepath.Join(w, "pipe")
	accepted, script := serviceAt(t, sock, fifo)

	out, err := rawBwrap(t, script, slices.Concat(systemBinds, []string{"--bind", w, w})...)
	if err != nil || !strings.Contains(out, "connected") || !strings.Contains(out, "fifo-open") || waitAccepted(accepted, 1) == 0 {
		t.Fatalf("control: a writable bind did not hand over the socket and FIFO (untested): %v %q, accepted %d", err, out, accepted.Load())
	}
	before := accepted.Load()
	rep := filepath.Join(sandboxtest.WorkDir(t), "r.json")
	r := sandboxed(t, w, script+fmt.Sprintf("; rm -f %s && echo removed; echo x > %s/ok && echo wrote", sock, w), "--report", rep)
	if r.code != 0 {
		t.Fatalf("exit %d: %s", r.code, r.stderr)
	}
	if !strings.Contains(r.stdout, "connect: Connection refused") || !strings.Contains(r.stdout, "fifo: Permission denied") {
		t.Errorf("inside: %q, want the socket refused and the FIFO closed", r.stdout)
	}
	if strings.Contains(r.stdout, "removed") || !strings.Contains(r.stdout, "wrote") {
		t.Errorf("inside: %q, want the cover kept and the workdir writable", r.stdout)
	}
	if n := accepted.Load(); n != before {
		t.Errorf("the service accepted %d connections from inside", n-before)
	}
	var report struct {
		WriteScan *struct {
			Entries int      `json:"entries"`
			Seconds float64  `json:"seconds"`
			Covered []string `json:"covered"`
		} `json:"write_scan"`
	}
	b, _ := os.ReadFile(rep)
	if err := json.Unmarshal(b, &report); err != nil || report.WriteScan == nil {
		t.Fatalf("report %s: %v", b, err)
	}
	ws := report.WriteScan
	if ws.Entries < 3 || ws.Seconds <= 0 || !slices.Contains(ws.Covered, sock) || !slices.Contains(ws.Covered, fifo) {
		t.Errorf("write_scan %+v, want %s and %s covered and a measured cost", ws, sock, fifo)
	}
	if _, err := os.Lstat(sock); err != nil {
		t.Errorf("the host's socket is gone: %v", err)
	}
}
