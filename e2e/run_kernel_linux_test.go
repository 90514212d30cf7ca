package e2e

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/sandbox-run/sandbox-run/internal/sandboxtest"
)

func token(t *testing.T) string {
	b := make([]byte, 8)
	rand.Read(b)
	return hex.EncodeToString(b)
}

func TestFilesystemView(t *testing.T) {
	needBwrap(t)
	w := sandboxtest.WorkDir(t)
	sibling := sandboxtest.WorkDir(t)
	flag := filepath.Join(sibling, "flag")
	os.WriteFile(flag, []byte("FLAG"), 0o644)
	hostTmp := filepath.Join("/tmp", "sbx-host-marker-"+token(t))
	os.WriteFile(hostTmp, []byte("x"), 0o644)
	t.Cleanup(func() { os.Remove(hostTmp) })
	home, _ := os.UserHomeDir()
	if home == "" {
		home = "/root"
	}

	script := fmt.Sprintf(`echo data > out && cat out
cat %[1]s && echo READ-FLAG
ls %[2]s >/dev/null && echo READ-HOME
test -e %[3]s && echo SAW-HOST-TMP
for d in /home /root /run /var /srv /mnt /media; do test -e $d/. && ls -A $d | head -1 | grep -q . && echo SAW-$d; done
true`, flag, home, hostTmp)

	// Positive control: unconfined, every target is reachable.
	ctl := unconfined(t, sandboxtest.WorkDir(t), script)
	for _, want := range []string{"READ-FLAG", "READ-HOME", "SAW-HOST-TMP"} {
		if !strings.Contains(ctl.stdout, want) {
			t.Fatalf("positive control did not reach %s (untested): %q %q", want, ctl.stdout, ctl.stderr)
		}
	}
	r := sandboxed(t, w, script)
	if r.code != 0 {
		t.Fatalf("exit %d: %s", r.code, r.stderr)
	}
	if !strings.HasPrefix(r.stdout, "data\n") {
		t.Errorf("workdir not writable: %q %q", r.stdout, r.stderr)
	}
	for _, bad := range []string{"READ-FLAG", "READ-HOME", "SAW-HOST-TMP", "SAW-/"} {
		if strings.Contains(r.stdout, bad) {
			t.Errorf("sandbox leaked %s: %q", bad, r.stdout)
		}
	}
	if b, _ := os.ReadFile(filepath.Join(w, "out")); string(b) != "data\n" {
		t.Errorf("write did not reach the host workdir: %q", b)
	}
	// The system is read-only.
	r = sandboxed(t, w, `touch /usr/x 2>/dev/null && echo WROTE-USR; touch /x 2>/dev/null && echo WROTE-ROOT; echo > /etc/x 2>/dev/null && echo WROTE-ETC; true`)
	if strings.Contains(r.stdout, "WROTE") {
		t.Errorf("system writable: %q", r.stdout)
	}
}

func TestEnvironment(t *testing.T) {
	needBwrap(t)
	w := sandboxtest.WorkDir(t)
	hostVar := "SBX_E2E_HOST_" + token(t)
	env := []string{hostVar + "=leaked", "SBX_PASS=passed"}
	r := runEnv(t, env, "", "run", "--workdir", w, "--env", "FOO=bar baz", "--pass-env", "SBX_PASS", "--", "env")
	if r.code != 0 {
		t.Fatalf("exit %d: %s", r.code, r.stderr)
	}
	if strings.Contains(r.stdout, hostVar) || strings.Contains(r.stdout, "leaked") {
		t.Errorf("host variable reached the command: %s", r.stdout)
	}
	for _, want := range []string{"FOO=bar baz\n", "SBX_PASS=passed\n", "HOME=/tmp\n"} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("env lacks %q: %s", want, r.stdout)
		}
	}
	// Positive control: the variable was in sandbox-run's own environment.
	r = runEnv(t, env, "", "run", "--workdir", w, "--pass-env", hostVar, "--", "env")
	if !strings.Contains(r.stdout, hostVar+"=leaked") {
		t.Errorf("control: --pass-env did not pass %s: %s", hostVar, r.stdout)
	}
}

// cmdlines returns every process's command line on the host.
func cmdlines() string {
	var b strings.Builder
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		if _, err := strconv.Atoi(e.Name()); err != nil {
			continue
		}
		c, _ := os.ReadFile("/proc/" + e.Name() + "/cmdline")
		b.Write(bytes.ReplaceAll(c, []byte{0}, []byte{' '}))
		b.WriteByte('\n')
	}
	return b.String()
}

func TestSecretNotOnAnyCmdline(t *testing.T) {
	needBwrap(t)
	w := sandboxtest.WorkDir(t)
	secret := "S3CRET" + token(t)
	visible := "VISIBLE" + token(t)
	c := exec.Command(bin, "run", "--workdir", w, "--env", "TOKEN="+secret, "--", "sh", "-c", "echo up; sleep 3", visible)
	out, _ := c.StdoutPipe()
	if err := c.Start(); err != nil {
		t.Fatal(err)
	}
	defer c.Wait()
	buf := make([]byte, 3)
	io.ReadFull(out, buf) // the command is running
	all := cmdlines()
	// Positive control: the scan sees the sandboxed command's own arguments.
	if !strings.Contains(all, visible) {
		t.Fatalf("control: the scan did not find the command's argument (untested)")
	}
	if strings.Contains(all, secret) {
		t.Errorf("the --env secret is on a host command line")
	}
	c.Process.Signal(syscall.SIGTERM)
}

func TestInheritedDescriptorInvisible(t *testing.T) {
	needBwrap(t)
	w := sandboxtest.WorkDir(t)
	f, err := os.Open("/etc/hostname")
	if err != nil {
		f, _ = os.Open("/etc/passwd")
	}
	defer f.Close()
	// fds 3..6 are fillers so that the probe is fd 7 in the child.
	extra := []*os.File{f, f, f, f, f}
	script := `for fd in $(seq 3 64); do test -e /proc/self/fd/$fd && [ "$(readlink /proc/self/fd/$fd)" != "/proc/$$/fd" ] && echo OPEN-$fd; done; true`
	// Positive control: a plain child sees fd 7.
	ctl := exec.Command("sh", "-c", script)
	ctl.ExtraFiles = extra
	co, _ := ctl.Output()
	if !strings.Contains(string(co), "OPEN-7") {
		t.Fatalf("control: fd 7 not inherited unconfined (untested): %q", co)
	}
	// With --allow-host, also the network namespace helper's socket and
	// the TUN device's descriptor (transparent egress) stay outside.
	for _, mode := range [][]string{{"--sandbox", "bwrap"}, {"--sandbox", "bwrap", "--nofile", "1024"}, {"--sandbox", "bwrap", "--allow-host", "example.com"}, {"--sandbox", "off"}} {
		c := exec.Command(bin, append(append([]string{"run", "--workdir", w}, mode...), "--", "sh", "-c", script)...)
		c.ExtraFiles = extra
		out, err := c.Output()
		if err != nil {
			t.Fatalf("%s: %v: %s", mode, err, out)
		}
		if strings.Contains(string(out), "OPEN-") {
			t.Errorf("%s: descriptors reached the command: %q", mode, out)
		}
	}
}

func TestRootMapsToUnprivilegedUID(t *testing.T) {
	needBwrap(t)
	sandboxtest.Root(t)
	w := sandboxtest.WorkDir(t)
	const sysctl = "/proc/sys/vm/overcommit_ratio"
	cur, err := os.ReadFile(sysctl)
	if err != nil {
		t.Fatal(err)
	}
	val := strings.TrimSpace(string(cur))
	write := fmt.Sprintf("echo %s > %s && echo WROTE-SYSCTL; cat /etc/shadow >/dev/null 2>&1 && echo READ-SHADOW; true", val, sysctl)

	// Positive control, the hole this closes: as root, bwrap's own
	// --unshare-all --cap-drop ALL still writes host sysctls and reads shadow.
	raw := exec.Command(sandboxtest.Bwrap(t), "--unshare-all", "--cap-drop", "ALL", "--die-with-parent",
		"--ro-bind", "/", "/", "--proc", "/proc", "--dev", "/dev", "--", "sh", "-c", write)
	ro, _ := raw.CombinedOutput()
	if !strings.Contains(string(ro), "WROTE-SYSCTL") || !strings.Contains(string(ro), "READ-SHADOW") {
		t.Fatalf("control: raw bwrap as root could not write %s / read shadow (untested): %q", sysctl, ro)
	}
	r := sandboxed(t, w, write+"; id -u; cat /proc/self/uid_map")
	if r.code != 0 {
		t.Fatalf("exit %d: %s", r.code, r.stderr)
	}
	if strings.Contains(r.stdout, "WROTE-SYSCTL") || strings.Contains(r.stdout, "READ-SHADOW") {
		t.Errorf("sandbox as root reached host-wide files: %q", r.stdout)
	}
	f := strings.Fields(r.stdout)
	if len(f) < 4 || f[0] != "65534" || f[1] != "65534" {
		t.Errorf("uid inside / uid_map = %q, want 65534 mapped to host 65534", r.stdout)
	}
	// --user picks another uid; the workdir must be writable for it. (In a
	// directory of root's own: one directly in /tmp that belongs to
	// neither root nor uid 4242, as w does, is refused before that.)
	top, err := os.MkdirTemp("/tmp", "sbx-user-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(top) })
	os.Chmod(top, 0o755)
	w2 := filepath.Join(top, "w")
	mustMkdir(t, w2)
	sandboxtest.Chown(t, w2)
	r = sandboxed(t, w2, "true", "--user", "4242")
	oneLine(t, r, w2, "not writable for uid 4242", "chown")
	r = sandboxed(t, w, "true", "--user", "4242")
	oneLine(t, r, w, "not yours alone", "owned by uid 65534")
}

func TestProcHardened(t *testing.T) {
	needBwrap(t)
	w := sandboxtest.WorkDir(t)
	r := sandboxed(t, w, `for f in /proc/kcore /proc/keys /proc/timer_list /proc/sched_debug; do test -e $f || continue; [ -s $f ] && head -c1 $f >/dev/null 2>&1 && echo READ-$f; done
touch /proc/sysrq-trigger 2>/dev/null && echo WROTE-sysrq
mount | grep -E ' /proc/sys ' | grep -q '(ro' && echo SYS-RO; true`)
	if strings.Contains(r.stdout, "READ-") || strings.Contains(r.stdout, "WROTE-") {
		t.Errorf("/proc not hardened: %q", r.stdout)
	}
	if !strings.Contains(r.stdout, "SYS-RO") {
		t.Errorf("/proc/sys is not a read-only mount: %q %q", r.stdout, r.stderr)
	}
}

// fileSnapshot records what is under dir, to prove a run left nothing.
func fileSnapshot(t *testing.T, dir string) string {
	var b strings.Builder
	filepath.Walk(dir, func(p string, fi os.FileInfo, err error) error {
		if err == nil {
			rel, _ := filepath.Rel(dir, p)
			fmt.Fprintf(&b, "%s %v %d\n", rel, fi.Mode(), fi.Size())
		}
		return nil
	})
	return b.String()
}

func TestProtectedPaths(t *testing.T) {
	needBwrap(t)
	files := []string{".git/config", ".gitmodules", ".mcp.json", ".bashrc", ".bash_profile", ".profile", ".zshrc"}
	dirs := []string{".git/hooks", ".vscode", ".idea", ".claude"}
	attack := `mkdir -p .git 2>/dev/null; for f in .git/config .gitmodules .mcp.json .bashrc .bash_profile .profile .zshrc; do echo evil >> $f 2>/dev/null && echo WROTE-$f; done
for d in .git/hooks .vscode .idea .claude; do mkdir -p $d 2>/dev/null; echo evil > $d/planted 2>/dev/null && echo WROTE-$d; done
true`
	// Missing ones: TestProtectedDefaultsEach (created, then quarantined).
	for _, present := range []bool{true} {
		t.Run(fmt.Sprintf("present=%v", present), func(t *testing.T) {
			w := sandboxtest.WorkDir(t)
			if present {
				os.MkdirAll(filepath.Join(w, ".git/objects"), 0o755)
				os.MkdirAll(filepath.Join(w, ".git/refs"), 0o755)
				os.WriteFile(filepath.Join(w, ".git/HEAD"), []byte("ref: refs/heads/main\n"), 0o644)
				for _, d := range dirs {
					os.MkdirAll(filepath.Join(w, d), 0o755)
				}
				for _, f := range files {
					os.WriteFile(filepath.Join(w, f), []byte("orig\n"), 0o644)
				}
				filepath.Walk(w, func(p string, _ os.FileInfo, _ error) error { sandboxtest.Chown(t, p); return nil })
			}
			before := fileSnapshot(t, w)
			// Positive control in a copy: unconfined, every write lands.
			cw := sandboxtest.WorkDir(t)
			ctl := unconfined(t, cw, attack)
			if strings.Count(ctl.stdout, "WROTE-") != len(files)+len(dirs) {
				t.Fatalf("control: unconfined attack did not write everything (untested): %q", ctl.stdout)
			}
			r := sandboxed(t, w, attack)
			if r.code != 0 {
				t.Fatalf("exit %d: %s", r.code, r.stderr)
			}
			if strings.Contains(r.stdout, "WROTE-") {
				t.Errorf("protected paths written: %q", r.stdout)
			}
			if after := fileSnapshot(t, w); after != before {
				t.Errorf("the run changed the user's tree:\nbefore:\n%s\nafter:\n%s", before, after)
			}
		})
	}
}

func TestProtectedRenameTrick(t *testing.T) {
	needBwrap(t)
	attack := `mv .git g2 2>/dev/null; mkdir -p .git/hooks 2>/dev/null; echo evil > .git/hooks/pre-commit 2>/dev/null && echo PLANTED; true`
	for _, present := range []bool{true, false} {
		t.Run(fmt.Sprintf("git-present=%v", present), func(t *testing.T) {
			w := sandboxtest.WorkDir(t)
			if present {
				// A repository as git makes it: hooks/ exists (a missing one
				// is writable while the run lasts, then quarantined).
				os.MkdirAll(filepath.Join(w, ".git/objects"), 0o755)
				os.MkdirAll(filepath.Join(w, ".git/hooks"), 0o755)
				os.WriteFile(filepath.Join(w, ".git/HEAD"), []byte("ref: refs/heads/main\n"), 0o644)
				filepath.Walk(w, func(p string, _ os.FileInfo, _ error) error { sandboxtest.Chown(t, p); return nil })
			}
			cw := sandboxtest.WorkDir(t)
			if present {
				os.MkdirAll(filepath.Join(cw, ".git/objects"), 0o755)
				filepath.Walk(cw, func(p string, _ os.FileInfo, _ error) error { sandboxtest.Chown(t, p); return nil })
			}
			if ctl := unconfined(t, cw, attack); !strings.Contains(ctl.stdout, "PLANTED") {
				t.Fatalf("control: unconfined rename trick failed (untested): %q", ctl.stdout)
			}
			before := fileSnapshot(t, w)
			r := sandboxed(t, w, attack)
			// Without a .git at start the command may make one (the live
			// window); its hook is quarantined as the run ends.
			if present && strings.Contains(r.stdout, "PLANTED") {
				t.Errorf("hook planted through the rename trick")
			}
			if _, err := os.Stat(filepath.Join(w, ".git/hooks/pre-commit")); err == nil {
				t.Errorf("pre-commit hook exists on the host")
			}
			if after := fileSnapshot(t, w); present && after != before {
				t.Errorf("the run changed the user's tree:\nbefore:\n%s\nafter:\n%s", before, after)
			}
		})
	}
}

func TestProtectedSymlinkRefused(t *testing.T) {
	needBwrap(t)
	w := sandboxtest.WorkDir(t)
	os.Symlink("/etc/passwd", filepath.Join(w, ".bashrc"))
	r := sandboxed(t, w, "true")
	oneLine(t, r, filepath.Join(w, ".bashrc"), "symbolic link", "/etc/passwd", "fix:")
}

// alive reports whether any process's command line contains marker.
func alive(marker string) bool { return strings.Contains(cmdlines(), marker) }

// sleepMark returns a number for sleep commands whose command lines no
// other process on the machine has: 8 digits, the first the caller's,
// then this test process's pid (the root and unprivileged CI lanes run
// these tests at once, and pid_max is below 10^7). The sleeps are killed
// when the test ends.
func sleepMark(t *testing.T, first int) int {
	n := first*10_000_000 + os.Getpid()
	t.Cleanup(func() { killSleeps(n) })
	return n
}

// killSleeps kills this user's sleeps marked n (see sleepMark).
func killSleeps(n int) {
	exec.Command("pkill", "-U", strconv.Itoa(os.Getuid()), "-f", fmt.Sprintf(`sleep %d\.`, n)).Run()
}

func waitGone(marker string, d time.Duration) bool {
	deadline := time.Now().Add(d)
	for time.Now().Before(deadline) {
		if !alive(marker) {
			return true
		}
		time.Sleep(50 * time.Millisecond)
	}
	return false
}

func TestNothingOutlivesTheRun(t *testing.T) {
	needBwrap(t)
	w := sandboxtest.WorkDir(t)
	n := sleepMark(t, 7)
	escape := fmt.Sprintf(`setsid sleep %d.1 </dev/null >/dev/null 2>&1 & (sleep %d.2 </dev/null >/dev/null 2>&1 &) ; sleep 0.2; echo started`, n, n)
	m1, m2, m3 := fmt.Sprintf("sleep %d.1", n), fmt.Sprintf("sleep %d.2", n), fmt.Sprintf("sleep %d.3", n)

	// Positive control: outside a sandbox, both escape the shell that
	// started them.
	exec.Command("sh", "-c", escape).Run()
	if !alive(m1) || !alive(m2) {
		t.Fatalf("control: setsid/double-forked children did not outlive an unconfined run (untested)")
	}
	killSleeps(n)
	waitGone(fmt.Sprintf("sleep %d.", n), 5*time.Second)

	for _, path := range launchPaths {
		t.Run(path.name+"/run ends", func(t *testing.T) {
			r := sandboxed(t, w, escape, path.flags...)
			if !strings.Contains(r.stdout, "started") {
				t.Fatalf("%q %q", r.stdout, r.stderr)
			}
			if !waitGone(m1, 5*time.Second) || !waitGone(m2, 5*time.Second) {
				t.Errorf("children outlived the run")
			}
		})
		t.Run(path.name+"/sandbox-run SIGKILLed", func(t *testing.T) {
			args := append(append([]string{"run", "--workdir", w}, path.flags...), "--", "sh", "-c", escape+"; "+m3)
			c := exec.Command(bin, args...)
			out, _ := c.StdoutPipe()
			if err := c.Start(); err != nil {
				t.Fatal(err)
			}
			b := make([]byte, 8)
			io.ReadFull(out, b)
			if !alive(m1) || !alive(m2) {
				t.Fatalf("children not started")
			}
			c.Process.Kill()
			c.Wait()
			if !waitGone(m1, 5*time.Second) || !waitGone(m2, 5*time.Second) || !waitGone(m3, 5*time.Second) {
				t.Errorf("sandbox processes survived SIGKILL of sandbox-run")
			}
		})
	}
}

func TestStdio(t *testing.T) {
	needBwrap(t)
	w := sandboxtest.WorkDir(t)
	t.Run("one line arrives at once", func(t *testing.T) {
		c := exec.Command(bin, "run", "--workdir", w, "--", "cat")
		in, _ := c.StdinPipe()
		out, _ := c.StdoutPipe()
		if err := c.Start(); err != nil {
			t.Fatal(err)
		}
		defer c.Wait()
		defer in.Close()
		msg := `{"jsonrpc":"2.0","id":1,"method":"initialize"}` + "\n"
		got := make(chan string, 1)
		go func() {
			b := make([]byte, len(msg))
			io.ReadFull(out, b)
			got <- string(b)
		}()
		start := time.Now()
		in.Write([]byte(msg))
		select {
		case s := <-got:
			if s != msg {
				t.Errorf("got %q", s)
			}
			t.Logf("one-line round trip through the sandbox: %v", time.Since(start))
		case <-time.After(20 * time.Second):
			t.Fatal("a line written to stdin did not come back while stdin stayed open (buffered?)")
		}
	})
	t.Run("100MB both ways", func(t *testing.T) {
		data := make([]byte, 100<<20)
		rand.Read(data)
		want := sha256.Sum256(data)
		for _, script := range []string{"cat", "cat >&2"} {
			c := exec.Command(bin, "run", "--workdir", w, "--", "sh", "-c", script)
			c.Stdin = bytes.NewReader(data)
			h := sha256.New()
			n := &countWriter{w: h}
			if script == "cat" {
				c.Stdout = n
			} else {
				c.Stderr = n
			}
			if err := c.Run(); err != nil {
				t.Fatalf("%s: %v", script, err)
			}
			if n.n != int64(len(data)) || !bytes.Equal(h.Sum(nil), want[:]) {
				t.Errorf("%s: %d bytes back, digest mismatch=%v", script, n.n, !bytes.Equal(h.Sum(nil), want[:]))
			}
		}
	})
}

type countWriter struct {
	w io.Writer
	n int64
}

func (c *countWriter) Write(b []byte) (int, error) { c.n += int64(len(b)); return c.w.Write(b) }

// launchPaths are the two ways a run starts its command: the fast path
// (bwrap's own PID 1 and a sh trampoline, when nothing is forwarded and no
// rlimit needs the exec shim) and sandbox-run's init (forced here by an
// rlimit). Tests of the command's life run through both.
var launchPaths = []struct {
	name  string
	flags []string
}{
	{"fast", nil},
	{"init", []string{"--nofile", "1024"}},
}

func TestExitStatus(t *testing.T) {
	needBwrap(t)
	w := sandboxtest.WorkDir(t)
	noexec := filepath.Join(w, "noexec.sh")
	os.WriteFile(noexec, []byte("#!/bin/sh\necho hi\n"), 0o644)
	tests := []struct {
		name string
		args []string
		want int
	}{
		{"own status", []string{"sh", "-c", "exit 3"}, 3},
		{"success", []string{"true"}, 0},
		{"SIGTERM", []string{"sh", "-c", "kill -TERM $$"}, 128 + 15},
		{"SIGKILL", []string{"sh", "-c", "kill -KILL $$"}, 128 + 9},
		{"not found", []string{"no-such-command-xyz"}, 127},
		{"not found by path", []string{"/usr/bin/no-such-command-xyz"}, 127},
		{"not executable", []string{noexec}, 126},
	}
	for _, path := range launchPaths {
		for _, tt := range tests {
			t.Run(path.name+"/"+tt.name, func(t *testing.T) {
				args := append(append([]string{"run", "--workdir", w}, path.flags...), "--")
				r := run(t, "", append(args, tt.args...)...)
				if r.code != tt.want {
					t.Errorf("exit %d, want %d (stderr %q)", r.code, tt.want, r.stderr)
				}
				if tt.want >= 126 && tt.want <= 127 && strings.Count(r.stderr, "\n") != 1 {
					t.Errorf("want one line on stderr, got %q", r.stderr)
				}
			})
		}
	}
	t.Run("timeout", func(t *testing.T) {
		start := time.Now()
		r := run(t, "", "run", "--workdir", w, "--timeout", "1s", "--", "sh", "-c", "sleep 30")
		if r.code != 124 {
			t.Errorf("exit %d, want 124 (%q)", r.code, r.stderr)
		}
		if time.Since(start) > 20*time.Second {
			t.Errorf("timeout did not end the run")
		}
	})
}

func TestSignalsReachTheCommand(t *testing.T) {
	needBwrap(t)
	w := sandboxtest.WorkDir(t)
	for _, path := range launchPaths {
		for _, sig := range []syscall.Signal{syscall.SIGTERM, syscall.SIGINT, syscall.SIGHUP} {
			name := strings.TrimPrefix(strings.ToUpper(sig.String()), "SIG")
			t.Run(path.name+"/"+sig.String(), func(t *testing.T) {
				// The shell's trap names the signal; the shell would otherwise die of it.
				script := fmt.Sprintf(`trap 'echo got-%s; exit 7' %s; echo ready; while :; do sleep 0.05; done`, sigName(sig), sigName(sig))
				args := append(append([]string{"run", "--workdir", w}, path.flags...), "--", "sh", "-c", script)
				c := exec.Command(bin, args...)
				out, _ := c.StdoutPipe()
				if err := c.Start(); err != nil {
					t.Fatal(err)
				}
				b := make([]byte, 6)
				io.ReadFull(out, b)
				c.Process.Signal(sig)
				rest, _ := io.ReadAll(out)
				err := c.Wait()
				code := 0
				if ee, ok := err.(*exec.ExitError); ok {
					code = ee.ExitCode()
				}
				if !strings.Contains(string(rest), "got-"+sigName(sig)) || code != 7 {
					t.Errorf("%s: output %q exit %d; want the command's trap to run and exit 7", name, rest, code)
				}
			})
		}
	}
}

func sigName(s syscall.Signal) string {
	switch s {
	case syscall.SIGTERM:
		return "TERM"
	case syscall.SIGINT:
		return "INT"
	case syscall.SIGHUP:
		return "HUP"
	}
	return "?"
}

// fakeBwrap writes a stand-in for bwrap that answers --version and --help
// like Debian's 0.8.0 and fails every real run with msg: a fake, for
// conditions this machine cannot produce (Ubuntu's AppArmor restriction,
// user namespaces switched off).
func fakeBwrap(t *testing.T, msg string) string {
	dir := sandboxtest.WorkDir(t)
	help, err := os.ReadFile("../bwrap/testdata/help-0.8.0-debian.txt")
	if err != nil {
		t.Fatal(err)
	}
	os.WriteFile(filepath.Join(dir, "help.txt"), help, 0o644)
	script := fmt.Sprintf(`#!/bin/sh
case "$1" in
--version) echo "bubblewrap 0.8.0"; exit 0;;
--help) cat %s/help.txt; exit 0;;
esac
echo %q >&2
exit 1
`, dir, msg)
	p := filepath.Join(dir, "fake-bwrap")
	os.WriteFile(p, []byte(script), 0o755)
	return p
}

func TestFailureMessages(t *testing.T) {
	needBwrap(t)
	w := sandboxtest.WorkDir(t)
	tests := []struct {
		name string
		args []string
		want []string
	}{
		{"bwrap missing", []string{"--bwrap", "/nonexistent/bwrap"}, []string{"bwrap not found", "install bubblewrap"}},
		{"uid map denied (fake)", []string{"--bwrap", fakeBwrap(t, "bwrap: setting up uid map: Permission denied")}, []string{"user namespace", "uid map", "fix:"}},
		{"RTM_NEWADDR (fake)", []string{"--bwrap", fakeBwrap(t, "bwrap: loopback: Failed RTM_NEWADDR: Operation not permitted")}, []string{"user namespace", "RTM_NEWADDR", "fix:"}},
		{"namespace creation (fake)", []string{"--bwrap", fakeBwrap(t, "bwrap: Creating new namespace failed: Operation not permitted")}, []string{"namespaces", "fix:", "user namespaces"}},
		{"unknown flag", []string{"--frobnicate"}, []string{"unknown flag", "--frobnicate", "fix:"}},
		{"missing workdir", []string{"--workdir", "/nonexistent/dir"}, []string{"/nonexistent/dir", "does not exist", "fix:"}},
		{"bwrap in workdir", []string{"--bwrap", copyBwrap(t, w)}, []string{"writable directory", "fix:"}},
		{"ptrace without yama", []string{"--ptrace"}, []string{"ptrace", "fix:"}},
		{"cgroup base unusable", []string{"--memory", "1G", "--cgroup-base", "/nonexistent/cgroup"}, []string{"--cgroup-base", "fix:"}},
		{"NUL in env", []string{"--env", "A=b\x00c"}, []string{"NUL"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			args := append([]string{"run", "--workdir", w}, tt.args...)
			if tt.name == "missing workdir" {
				args = append([]string{"run"}, tt.args...) // --workdir takes one value
			}
			if tt.name == "NUL in env" {
				// argv cannot carry NUL; a profile can.
				prof := filepath.Join(sandboxtest.WorkDir(t), "p.json")
				os.WriteFile(prof, []byte(`{"env":{"A":"b\u0000c"}}`), 0o644)
				args = []string{"run", "--workdir", w, "--config", prof}
			}
			marker := filepath.Join(w, "ran-"+token(t))
			r := run(t, "", append(args, "--", "touch", marker)...)
			oneLine(t, r, tt.want...)
			if _, err := os.Stat(marker); err == nil {
				t.Errorf("the command ran despite the refusal")
			}
		})
	}
}

func copyBwrap(t *testing.T, dir string) string {
	src, err := exec.LookPath("bwrap")
	if err != nil {
		t.Fatal(err)
	}
	b, _ := os.ReadFile(src)
	p := filepath.Join(dir, "bwrap")
	os.WriteFile(p, b, 0o755)
	return p
}

func TestDryRunRedacts(t *testing.T) {
	needBwrap(t)
	w := sandboxtest.WorkDir(t)
	secret := "DRY" + token(t)
	marker := filepath.Join(w, "ran")
	r := run(t, "", "run", "--workdir", w, "--env", "TOKEN="+secret, "--dry-run", "--", "touch", marker)
	if r.code != 0 {
		t.Fatalf("exit %d: %s", r.code, r.stderr)
	}
	if strings.Contains(r.stdout+r.stderr, secret) {
		t.Errorf("dry run printed the secret")
	}
	for _, want := range []string{"--args", "--setenv", "TOKEN", "<redacted>", "--unshare-net", "--cap-drop"} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("dry run lacks %q:\n%s", want, r.stdout)
		}
	}
	if _, err := os.Stat(marker); err == nil {
		t.Errorf("dry run ran the command")
	}
}

func TestReportReadBack(t *testing.T) {
	needBwrap(t)
	w := sandboxtest.WorkDir(t)
	rep := filepath.Join(sandboxtest.WorkDir(t), "report.json")
	r := run(t, "", "run", "--workdir", w, "--report", rep, "--", "true")
	if r.code != 0 {
		t.Fatalf("exit %d: %s", r.code, r.stderr)
	}
	b, err := os.ReadFile(rep)
	if err != nil {
		t.Fatal(err)
	}
	s := string(b)
	for _, want := range []string{`"mechanism": "bwrap"`, `"tier": 1`, `"no_new_privs": 1`, `"cap_eff": "0000000000000000"`, `"net": "net:[`} {
		if !strings.Contains(s, want) {
			t.Errorf("report lacks %s:\n%s", want, s)
		}
	}
	// The namespaces read back differ from the host's own.
	hostNet, _ := os.Readlink("/proc/self/ns/net")
	if strings.Contains(s, hostNet) {
		t.Errorf("report's net namespace is the host's (%s)", hostNet)
	}
	_ = context.Background
}
