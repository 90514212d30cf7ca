package sandbox

import (
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/sandbox-run/sandbox-run/internal/limits"
	"github.com/sandbox-run/sandbox-run/internal/sandboxtest"
)

func TestTrampolineRlimits(t *testing.T) {
	core := limits.Rlimit{Resource: limits.Core}
	for _, c := range []struct {
		name  string
		rs    []limits.Rlimit
		nproc uint64
		shim  bool
	}{
		{"none", nil, 0, false},
		{"core only", []limits.Rlimit{core}, 0, false},
		{"core and nproc", []limits.Rlimit{core, {Resource: limits.NProc, Soft: 50, Hard: 50}}, 50, false},
		{"nproc soft below hard", []limits.Rlimit{core, {Resource: limits.NProc, Soft: 50, Hard: 60}}, 0, true},
		{"nofile", []limits.Rlimit{core, {Resource: limits.NoFile, Soft: 64, Hard: 64}}, 0, true},
		{"core not zero", []limits.Rlimit{{Resource: limits.Core, Soft: 1, Hard: 1}}, 0, true},
	} {
		nproc, shim := trampolineRlimits(c.rs)
		if nproc != c.nproc || shim != c.shim {
			t.Errorf("%s: trampolineRlimits = %d, %v; want %d, %v", c.name, nproc, shim, c.nproc, c.shim)
		}
	}
}

// TestTrampolineNProc runs the fast path's script under each shell there
// is here (dash takes ulimit -p, bash -u): it must set RLIMIT_NPROC, read
// it back and start the command; asked for more than the hard limit it
// must refuse with an error line and status 125, and run nothing.
func TestTrampolineNProc(t *testing.T) {
	sandboxtest.ProcessCount(t)
	var hard unix.Rlimit
	if err := unix.Getrlimit(unix.RLIMIT_NPROC, &hard); err != nil || hard.Max < 200 || hard.Max == unix.RLIM_INFINITY {
		sandboxtest.Unavailable(t, "a finite hard RLIMIT_NPROC of 200 or more", fmt.Sprintf("it is %d here", hard.Max))
	}
	// Root could raise the hard limit; the sandbox never runs as root.
	var cred *syscall.Credential
	if os.Geteuid() == 0 {
		cred = &syscall.Credential{Uid: 65534, Gid: 65534, Groups: []uint32{}}
	}
	shells := 0
	for _, sh := range []string{"/bin/sh", "/bin/dash", "/bin/bash", "/bin/busybox"} {
		if _, err := os.Stat(sh); err != nil {
			continue
		}
		shells++
		t.Run(sh, func(t *testing.T) {
			run := func(nproc uint64) (status string, out string, code int) {
				args := trampolineArgs("/bin/sh", []string{"/bin/sh", "-c", "grep 'Max processes' /proc/self/limits"}, nproc)
				if sh == "/bin/busybox" {
					args = append([]string{"sh"}, args[1:]...)
				}
				statusR, statusW, _ := os.Pipe()
				defer statusR.Close()
				c := exec.Command(sh, args[1:]...)
				if sh == "/bin/busybox" {
					c = exec.Command(sh, args...)
				}
				var o strings.Builder
				c.Stdout = &o
				// fd 4: status, 5: the real stderr, 7: the init slot.
				c.ExtraFiles = []*os.File{nil, statusW, os.Stderr, nil, os.Stdin}
				c.SysProcAttr = &syscall.SysProcAttr{Credential: cred}
				if cred == nil {
					c.SysProcAttr = sandboxtest.OwnUserNS()
				}
				c.Dir = "/"
				err := c.Start()
				statusW.Close()
				if err != nil {
					t.Fatal(err)
				}
				b, _ := io.ReadAll(statusR)
				c.Wait()
				return string(b), o.String(), c.ProcessState.ExitCode()
			}
			st, out, code := run(150)
			if code != 0 || !strings.Contains(st, "started") || !strings.Contains(out, "150                  150") {
				t.Fatalf("nproc 150: exit %d status %q out %q", code, st, out)
			}
			{
				st, out, code = run(hard.Max + 1)
				if code != 125 || !strings.HasPrefix(st, "error: ") || strings.Contains(st, "started") || out != "" {
					t.Fatalf("nproc above hard: exit %d status %q out %q, want 125 and an error line", code, st, out)
				}
				if d := decodeTrampoline([]byte(st)); d.Started || d.Exit != 125 || d.Error == "" {
					t.Errorf("decodeTrampoline(%q) = %+v", st, d)
				}
			}
		})
	}
	if shells == 0 {
		t.Fatal("no shell to run the trampoline")
	}
}
