//go:build linux || darwin

package check

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"time"

	"github.com/sandbox-run/sandbox-run/internal/probe"
	"github.com/sandbox-run/sandbox-run/policy"
	"github.com/sandbox-run/sandbox-run/report"
)

// sandboxReport sets up one real sandbox with binary (empty: this one),
// runs /usr/bin/true in it and returns its isolation report. On failure the
// report is nil and summary and fix say why; what names the sandbox in
// that summary.
func sandboxReport(ctx context.Context, binary, what string, extra ...string) (r *report.Report, summary, fix string) {
	if binary == "" {
		exe, err := os.Executable()
		if err != nil {
			return nil, "cannot find sandbox-run's own binary: " + err.Error(), "run check from the sandbox-run binary"
		}
		binary = exe
	}
	dir, err := os.MkdirTemp("/tmp", "sbx-check-")
	if err != nil {
		return nil, "cannot create a workdir: " + err.Error(), "make /tmp writable"
	}
	defer os.RemoveAll(dir)
	if runtime.GOOS == "darwin" {
		// /tmp is a link to /private/tmp, and Seatbelt matches resolved
		// paths: hand out the resolved one.
		if r, err := filepath.EvalSymlinks(dir); err == nil {
			dir = r
		}
	}
	os.Chmod(dir, 0o755)
	w := filepath.Join(dir, "w")
	os.Mkdir(w, 0o755)
	if os.Geteuid() == 0 {
		os.Chown(w, policy.DefaultUID, policy.DefaultGID)
	}
	rep := filepath.Join(dir, "report.json")
	ctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	args := append(append([]string{"run", "--workdir", w, "--report", rep}, extra...), "--", "/usr/bin/true")
	cmd := exec.CommandContext(ctx, binary, args...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Run(); err != nil {
		// The refusal's one line ends in "; fix: ...": the fix is the
		// remediation, whole, however long the reason before it.
		msg, fix, ok := strings.Cut(strings.Join(strings.Fields(stderr.String()), " "), "; fix: ")
		if !ok {
			return nil, what + " could not be set up: " + probe.OneLine(stderr.String()+" "+err.Error()), "follow the fix in the message above"
		}
		return nil, what + " could not be set up: " + probe.OneLine(msg), fix
	}
	b, err := os.ReadFile(rep)
	if err != nil {
		return nil, "no isolation report: " + err.Error(), "report this as a bug in sandbox-run"
	}
	r = new(report.Report)
	if err := json.Unmarshal(b, r); err != nil {
		return nil, "unreadable isolation report: " + err.Error(), "report this as a bug in sandbox-run"
	}
	return r, "", ""
}
