package bwrap

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"testing"

	"github.com/sandbox-run/sandbox-run/internal/fault"
	"github.com/sandbox-run/sandbox-run/internal/initproc"
	"github.com/sandbox-run/sandbox-run/internal/sandboxtest"
)

// TestTrampolineNProc runs the fast path's script under each shell there
// is here (dash takes ulimit -p, bash -u), playing sandbox-run's part at
// the gate: the script must set RLIMIT_NPROC, wait at the gate, and start
// the command once readTrampoline has read the limit back and "go" was
// sent; with the gate kept shut (the limit read back is not the one
// asked for) it must exit 125 and run nothing; asked for more than the
// hard limit it must refuse with an error line and status 125, and never
// reach the gate.
func TestTrampolineNProc(t *testing.T) {
	sandboxtest.ProcessCount(t)
	hard := sandboxtest.HardNProc(t, 200)
	for _, sh := range sandboxtest.Shells(t) {
		t.Run(sh, func(t *testing.T) {
			// run starts the script with nproc, and at the gate reads it
			// back expecting want; it returns the status lines, the
			// command's output, the exit code and readTrampoline's answer.
			run := func(nproc, want uint64) (status, out string, code int, rbErr error) {
				args := trampolineArgs("/bin/sh", []string{"/bin/sh", "-c", "grep 'Max processes' /proc/self/limits"}, nproc)
				statusR, statusW, _ := os.Pipe()
				defer statusR.Close()
				gateR, gateW, _ := os.Pipe()
				defer gateW.Close()
				c := sandboxtest.ShellCommand(sh, args[1:]...)
				var o strings.Builder
				c.Stdout = &o
				// fd 4: status, 5: the real stderr, 7: the gate.
				c.ExtraFiles = []*os.File{nil, statusW, os.Stderr, nil, gateR}
				c.SysProcAttr = sandboxtest.AsSandboxUser()
				c.Dir = "/"
				err := c.Start()
				statusW.Close()
				gateR.Close()
				if err != nil {
					t.Fatal(err)
				}
				br := bufio.NewReader(statusR)
				first, _ := br.ReadString('\n')
				if first == "ready\n" {
					var rb *initproc.Readback
					if rb, rbErr = readTrampoline(c.Process.Pid, want); rbErr == nil {
						if rb.NoNewPrivs < 0 || rb.UID < 0 || rb.GID < 0 || rb.CapBnd == "" {
							t.Errorf("read-back at the gate is incomplete: %+v", rb)
						}
						gateW.WriteString("go\n")
					}
				}
				gateW.Close()
				rest, _ := io.ReadAll(br)
				c.Wait()
				return first + string(rest), o.String(), c.ProcessState.ExitCode(), rbErr
			}
			st, out, code, err := run(150, 150)
			if code != 0 || err != nil || !strings.Contains(st, "started") || !strings.Contains(out, "150                  150") {
				t.Fatalf("nproc 150: exit %d status %q out %q read-back %v", code, st, out, err)
			}
			st, out, code, err = run(150, 151)
			if !errors.Is(err, errNProcNotHeld) || code != 125 || strings.Contains(st, "started") || out != "" {
				t.Fatalf("gate kept shut: exit %d status %q out %q read-back %v, want 125, errNProcNotHeld and nothing run", code, st, out, err)
			}
			st, out, code, _ = run(hard+1, hard+1)
			if code != 125 || !strings.HasPrefix(st, "error: ") || strings.Contains(st, "ready") || out != "" {
				t.Fatalf("nproc above hard: exit %d status %q out %q, want 125 and an error line", code, st, out)
			}
			if d := decodeTrampoline([]byte(st)); d.Started || d.Exit != 125 || d.Error == "" {
				t.Errorf("decodeTrampoline(%q) = %+v", st, d)
			}
		})
	}
}

// TestGateFailed: a gate kept shut is a set-up error naming why, and a
// process ceiling not held is told apart from a read-back that failed.
func TestGateFailed(t *testing.T) {
	for _, c := range []struct {
		err  error
		what string
	}{
		{nil, ""},
		{fmt.Errorf("%w: it reads back as '5 5', not 6", errNProcNotHeld), "the sandbox's process ceiling could not be set"},
		{os.ErrPermission, "cannot read back the sandbox before its command starts"},
	} {
		err := (&bwWatch{gateErr: c.err}).failed()
		var se *fault.Error
		switch {
		case c.what == "" && err != nil:
			t.Errorf("gate error %v: failed() = %v, want nil", c.err, err)
		case c.what != "" && (!errors.As(err, &se) || se.What != c.what || !strings.Contains(se.Why, c.err.Error())):
			t.Errorf("gate error %v: failed() = %v, want a SetupError %q", c.err, err, c.what)
		}
	}
}
