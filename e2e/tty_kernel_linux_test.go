package e2e

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/sandbox-run/sandbox-run/internal/sandboxtest"
)

// ptyRun is sandbox-run started on a pseudo-terminal of the test's, as
// from a terminal emulator: the terminal is its stdin, stdout, stderr and
// controlling terminal.
type ptyRun struct {
	master *os.File
	cmd    *exec.Cmd
	mu     sync.Mutex
	out    bytes.Buffer
}

func startPTY(t *testing.T, env []string, args ...string) *ptyRun {
	t.Helper()
	return startOnPTY(t, env, bin, args...)
}

// startOnPTY starts prog with args on a new pseudo-terminal, as its
// controlling terminal.
func startOnPTY(t *testing.T, env []string, prog string, args ...string) *ptyRun {
	t.Helper()
	master, err := os.OpenFile("/dev/ptmx", os.O_RDWR|unix.O_NOCTTY, 0)
	if err != nil {
		sandboxtest.Unavailable(t, "a pseudo-terminal", "mount devpts")
	}
	if err := unix.IoctlSetPointerInt(int(master.Fd()), unix.TIOCSPTLCK, 0); err != nil {
		t.Fatal(err)
	}
	n, err := unix.IoctlGetInt(int(master.Fd()), unix.TIOCGPTN)
	if err != nil {
		t.Fatal(err)
	}
	slave, err := os.OpenFile("/dev/pts/"+strconv.Itoa(n), os.O_RDWR|unix.O_NOCTTY, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer slave.Close()
	unix.IoctlSetWinsize(int(master.Fd()), unix.TIOCSWINSZ, &unix.Winsize{Row: 30, Col: 100})
	c := exec.Command(prog, args...)
	c.Env = append(os.Environ(), env...)
	c.Stdin, c.Stdout, c.Stderr = slave, slave, slave
	c.SysProcAttr = &syscall.SysProcAttr{Setsid: true, Setctty: true, Ctty: 0}
	if err := c.Start(); err != nil {
		t.Fatal(err)
	}
	r := &ptyRun{master: master, cmd: c}
	go func() {
		b := make([]byte, 4096)
		for {
			n, err := master.Read(b)
			r.mu.Lock()
			r.out.Write(b[:n])
			r.mu.Unlock()
			if err != nil {
				return
			}
		}
	}()
	t.Cleanup(func() {
		// A moment to end on its own first: sandbox-run killed skips its
		// own cleanup (a landlock run's TMPDIR is then the next run's to
		// sweep), and a test's leftovers outlive it.
		done := make(chan struct{})
		go func() { c.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(5 * time.Second):
		}
		c.Process.Kill() // a no-op once it has ended
		<-done
		master.Close()
	})
	return r
}

// signalState says where a terminal's signals would go: the terminal's
// foreground process group and sandbox-run's own ids and signal masks
// (a SIGWINCH that never arrived is told from one that was not handled).
func (r *ptyRun) signalState() string {
	fg, err := unix.IoctlGetInt(int(r.master.Fd()), unix.TIOCGPGRP)
	pid := r.cmd.Process.Pid
	st, _ := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	status, _ := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/status")
	var sig []string
	for _, l := range strings.Split(string(status), "\n") {
		if strings.HasPrefix(l, "Sig") || strings.HasPrefix(l, "ShdPnd") || strings.HasPrefix(l, "State") {
			sig = append(sig, l)
		}
	}
	return fmt.Sprintf("foreground group %d (error %v); sandbox-run pid %d; stat %s; %s", fg, err, pid, st, strings.Join(sig, "; "))
}

// expect waits until the output after from holds s; it returns the
// output's length after s.
func (r *ptyRun) expect(t *testing.T, from int, s string, d time.Duration) int {
	t.Helper()
	at, ok := r.await(from, s, d)
	if !ok {
		r.mu.Lock()
		out := r.out.String()
		r.mu.Unlock()
		t.Fatalf("no %q within %v; output after %d: %q", s, d, from, out[min(from, len(out)):])
	}
	return at
}

// await is expect that reports a miss instead of failing the test.
func (r *ptyRun) await(from int, s string, d time.Duration) (int, bool) {
	for deadline := time.Now().Add(d); ; time.Sleep(10 * time.Millisecond) {
		r.mu.Lock()
		out := r.out.String()
		r.mu.Unlock()
		if from > len(out) {
			from = len(out)
		}
		if i := strings.Index(out[from:], s); i >= 0 {
			return from + i + len(s), true
		}
		if time.Now().After(deadline) {
			return from, false
		}
	}
}

func (r *ptyRun) send(t *testing.T, s string) {
	t.Helper()
	if _, err := r.master.WriteString(s); err != nil {
		t.Fatal(err)
	}
}

// terminalMechanisms are the mechanisms that give the command a terminal
// of its own (the skeleton's), each with what it needs here.
var terminalMechanisms = []struct {
	mode string
	need func(*testing.T)
}{
	{"bwrap", needBwrap},
	{"landlock", func(t *testing.T) { sandboxtest.Landlock(t, 1) }},
}

// TestTerminal: from a terminal, bash -i gets a terminal of its own inside
// the sandbox, under each mechanism that gives one: job control on,
// Ctrl-C ends the foreground sleep (the prompt is back long before the
// sleep would end, and $? is 130), Ctrl-Z stops it, the window size is
// passed and follows a resize, TERM is passed.
func TestTerminal(t *testing.T) {
	for _, m := range terminalMechanisms {
		t.Run(m.mode, func(t *testing.T) {
			m.need(t)
			terminalSession(t, m.mode)
		})
	}
}

// terminalSession is TestTerminal under mode.
func terminalSession(t *testing.T, mode string) {
	w := sandboxtest.WorkDir(t)
	r := startPTY(t, []string{"TERM=xterm-sbxtest"}, "run", "--sandbox", mode, "--workdir", w, "--env", "PS1=SBXP$ ", "--", "bash", "--norc", "--noprofile", "-i")
	at := r.expect(t, 0, "SBXP$ ", 10*time.Second)
	r.send(t, "echo T=$TERM; set -o | grep monitor; stty size\n")
	at = r.expect(t, at, "T=xterm-sbxtest", 5*time.Second)
	at = r.expect(t, at, "on", 5*time.Second)
	at = r.expect(t, at, "30 100", 5*time.Second)
	at = r.expect(t, at, "SBXP$ ", 5*time.Second)

	// The job prints FGUP once it runs in the foreground (the quotes
	// keep the terminal's echo of the line from matching): a ^C or ^Z
	// sent before then would reach bash at its prompt instead.
	const fg = "sh -c 'echo FG\"\"UP; exec sleep 100'\n"
	r.send(t, fg)
	at = r.expect(t, at, "FGUP", 10*time.Second)
	r.send(t, "\x03")
	at = r.expect(t, at, "SBXP$ ", 5*time.Second) // the sleep had 100 s to go
	r.send(t, "echo rc=$?\n")
	at = r.expect(t, at, "rc=130", 5*time.Second)

	r.send(t, fg)
	at = r.expect(t, at, "FGUP", 10*time.Second)
	r.send(t, "\x1a")
	at = r.expect(t, at, "Stopped", 5*time.Second)
	r.send(t, "kill %1\n")
	at = r.expect(t, at, "SBXP$ ", 5*time.Second)

	// A resize of the outer terminal sends sandbox-run SIGWINCH, which it
	// handles in its own time: ask again until the new size shows,
	// bounded.
	unix.IoctlSetWinsize(int(r.master.Fd()), unix.TIOCSWINSZ, &unix.Winsize{Row: 40, Col: 120})
	resized := false
	for deadline := time.Now().Add(10 * time.Second); !resized && time.Now().Before(deadline); {
		r.send(t, "stty size\n")
		_, resized = r.await(at, "40 120", time.Second)
	}
	if !resized {
		t.Log(r.signalState())
		r.expect(t, at, "40 120", 0)
	}
	r.send(t, "exit 7\n")
	done := make(chan error, 1)
	go func() { done <- r.cmd.Wait() }()
	select {
	case err := <-done:
		if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 7 {
			t.Errorf("exit: %v, want status 7", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("sandbox-run did not end after exit")
	}
}

// TestTerminalInjectionRefused: with the sandbox's own terminal, TIOCSTI
// (typing into the terminal) and TIOCLINUX stay refused by seccomp
// (EPERM). Control: the same script unconfined, on a terminal that is its
// controlling terminal, gets TIOCSTI through and TIOCLINUX fails there with
// another error (ENOTTY: a pseudo-terminal is no virtual console).
func TestTerminalInjectionRefused(t *testing.T) {
	for _, m := range terminalMechanisms {
		t.Run(m.mode, func(t *testing.T) {
			m.need(t)
			injectionRefused(t, m.mode)
		})
	}
}

// injectionRefused is TestTerminalInjectionRefused under mode.
func injectionRefused(t *testing.T, mode string) {
	if _, err := exec.LookPath("python3"); err != nil {
		sandboxtest.Unavailable(t, "python3", "apt-get install -y python3")
	}
	w := sandboxtest.WorkDir(t)
	script := `import fcntl, termios
for name, req, arg in (("TIOCSTI", termios.TIOCSTI, b"x"), ("TIOCLINUX", 0x541C, b"\x0b")):
    try:
        fcntl.ioctl(0, req, arg); print(name, "ok")
    except OSError as e:
        print(name, "errno", e.errno)
print("END")
`
	res := map[string]string{}
	py, _ := exec.LookPath("python3")
	for _, m := range []string{"off", mode} {
		var r *ptyRun
		if m == "off" {
			r = startOnPTY(t, nil, py, "-c", script)
		} else {
			r = startPTY(t, nil, "run", "--sandbox", mode, "--workdir", w, "--tty", "--", "python3", "-c", script)
		}
		r.expect(t, 0, "END", 10*time.Second)
		r.mu.Lock()
		res[m] = r.out.String()
		r.mu.Unlock()
	}
	t.Logf("unconfined: %q; sandboxed: %q", res["off"], res[mode])
	if !strings.Contains(res["off"], "TIOCSTI ok") {
		sandboxtest.Unavailable(t, "TIOCSTI unconfined (the positive control): "+res["off"], "set dev.tty.legacy_tiocsti=1")
	}
	if !strings.Contains(res[mode], "TIOCSTI errno 1") || !strings.Contains(res[mode], "TIOCLINUX errno 1") {
		t.Errorf("inside the sandbox: %q, want EPERM (1) for both", res[mode])
	}
	if strings.Contains(res["off"], "TIOCLINUX errno 1\r") {
		t.Errorf("control: TIOCLINUX unconfined already EPERM, so the sandbox's EPERM proves nothing: %q", res["off"])
	}
}

// TestTerminalQuarantineLine: with a terminal, the line naming what the
// run quarantined comes after the command's last output and after the
// caller's terminal is restored from raw mode (its newline reaches the
// terminal as CR LF, which raw mode does not add), on the fast path and on
// the network path, which settles protected paths early when there is no
// terminal. Control: a newline written to the same kind of terminal in
// raw mode reaches it without the CR, so the check can tell.
func TestTerminalQuarantineLine(t *testing.T) {
	needBwrap(t)
	ctl := startOnPTY(t, nil, "sh", "-c", `stty raw -opost; printf 'A\nB'`)
	ctl.cmd.Wait()
	ctl.expect(t, 0, "B", 5*time.Second)
	ctl.mu.Lock()
	raw := ctl.out.String()
	ctl.mu.Unlock()
	if !strings.Contains(raw, "A\nB") {
		t.Fatalf("untested: a newline in raw mode reached the terminal as %q, not a bare LF", raw)
	}
	script := `printf LAST; echo '{}' > .mcp.json`
	for _, c := range bwrapPaths {
		t.Run(c.name, func(t *testing.T) {
			w := sandboxtest.WorkDir(t)
			args := append(append([]string{"run", "--workdir", w, "--tty"}, c.extra...), "--", "sh", "-c", script)
			r := startPTY(t, cacheEnv(t), args...)
			if err := r.cmd.Wait(); err != nil {
				t.Fatalf("run: %v", err)
			}
			at := r.expect(t, 0, "LAST", 5*time.Second)
			// The run has ended, but the reader may not have read the
			// line yet: wait for it, and for its newline.
			q := "sandbox-run: quarantined " + filepath.Join(w, ".mcp.json")
			end := r.expect(t, at, q, 5*time.Second)
			nl := r.expect(t, end, "\n", 5*time.Second)
			r.mu.Lock()
			line := r.out.String()[end-len(q) : nl-1]
			r.mu.Unlock()
			if !strings.HasSuffix(line, "\r") {
				t.Errorf("the quarantine line was written in raw mode (no CR before its newline): %q", line)
			}
		})
	}
}
