package cli

import (
	"io"
	"strings"
	"testing"
)

// FuzzRunFlags feeds arbitrary argument lists to the run flags and the
// policy built from them: never a panic, and a refusal is a message
// without a stack trace that fail prints as one line.
func FuzzRunFlags(f *testing.F) {
	for _, s := range []string{
		"--workdir\x00/tmp\x00--\x00true",
		"--workdir\x00/tmp\x00--workdir\x00/\x00--\x00x",
		"--read\x00\x00--write\x00a/../b\x00--env\x00=x",
		"--memory\x0012X\x00--pids\x00-1\x00--timeout\x00-5s\x00--user\x004294967296",
		"--allow-host\x00fe80::1%eth0\x00--tmp-size\x000\x00--cpu-time\x000s",
		"--dry-run\x00--dry-run\x00--sandbox\x00docker",
	} {
		f.Add(s)
	}
	getwd := func() (string, error) { return "/work", nil }
	f.Fuzz(func(t *testing.T, s string) {
		args := strings.Split(s, "\x00")
		fl := newRunFlags()
		fl.fs.SetOutput(io.Discard)
		if strings.Contains(s, "--config") {
			return // reads a file: not this target's business
		}
		if err := fl.fs.Parse(args); err != nil {
			checkMessage(t, err)
			return
		}
		p, err := fl.policy(getwd)
		if err == nil {
			err = p.Validate()
		}
		if err != nil {
			checkMessage(t, err)
		}
	})
}

func checkMessage(t *testing.T, err error) {
	t.Helper()
	msg := err.Error()
	if msg == "" || strings.Contains(msg, "goroutine ") || strings.Contains(msg, "panic") {
		t.Fatalf("refusal %q", msg)
	}
}
