package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sandbox-run/sandbox-run/filter"
	"github.com/sandbox-run/sandbox-run/internal/sandboxtest"
)

// underNamespaceFilter runs sandbox-run with args the way a container
// runtime's default seccomp profile would hold it: inside an outer bwrap
// (the "container", a FAKE) whose seccomp filter is sandbox-run's own
// deny-list, which refuses unshare, setns and clone with namespace flags,
// as docker's default profile does for a process without CAP_SYS_ADMIN.
// (Debian's podman's default profile allows those and refuses sethostname
// instead; podman_kernel_linux_test.go runs that container for real.)
// useFilter false is the positive control: the same outer bwrap without
// the filter.
func underNamespaceFilter(t *testing.T, useFilter bool, w string, args ...string) result {
	t.Helper()
	bw := sandboxtest.Bwrap(t)
	arch, err := filter.NativeArch()
	if err != nil {
		sandboxtest.Unavailable(t, "a seccomp filter for this machine", err.Error())
	}
	prog, err := filter.Assemble(arch, filter.Options{})
	if err != nil {
		t.Fatal(err)
	}
	outer := []string{"--die-with-parent", "--unshare-pid", "--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc",
		"--tmpfs", "/tmp", "--ro-bind", filepath.Dir(bin), filepath.Dir(bin), "--bind", w, w,
		// sandbox-run's own state on the container's /tmp, outside the
		// workdir (a workdir that holds it is refused).
		"--setenv", "XDG_CACHE_HOME", "/tmp/outer-cache", "--setenv", "XDG_STATE_HOME", "/tmp/outer-state"}
	var extra []*os.File
	if useFilter {
		r, wr, err := os.Pipe()
		if err != nil {
			t.Fatal(err)
		}
		go func() { wr.Write(prog.Bytes()); wr.Close() }()
		defer r.Close()
		extra = append(extra, r)
		outer = append(outer, "--seccomp", "3")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	c := exec.CommandContext(ctx, bw, append(append(outer, "--", bin), args...)...)
	c.ExtraFiles = extra
	var o, e bytes.Buffer
	c.Stdout, c.Stderr = &o, &e
	err = c.Run()
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatalf("outer bwrap: %v", err)
	}
	return result{o.String(), e.String(), code}
}

// TestContainerSeccompDiagnosed: sandbox-run held by a seccomp filter that
// refuses namespace creation (what a container runtime's default profile
// does) says so, names the runtime flags that allow it, and runs nothing.
// The container is a FAKE (an outer bwrap with sandbox-run's own filter);
// the control is the same outer bwrap without the filter, where the run
// works.
func TestContainerSeccompDiagnosed(t *testing.T) {
	needBwrap(t)
	// As root the outer bwrap has no user namespace of its own, and the
	// sandbox inside cannot mount its /proc there: the control fails. CI
	// runs this as its unprivileged user (make test-kernel).
	sandboxtest.NonRoot(t)
	w := sandboxtest.WorkDir(t)
	if ctl := underNamespaceFilter(t, false, w, "run", "--workdir", w, "--", "touch", filepath.Join(w, "ctl")); ctl.code != 0 {
		t.Fatalf("control (outer bwrap without the filter): exit %d %q", ctl.code, ctl.stderr)
	}
	marker := filepath.Join(w, "ran")
	r := underNamespaceFilter(t, true, w, "run", "--workdir", w, "--", "touch", marker)
	oneLine(t, r, "seccomp", "namespace", "fix:", "--security-opt seccomp=")
	if _, err := os.Stat(marker); err == nil {
		t.Errorf("the command ran under the filter")
	}
	c := underNamespaceFilter(t, true, w, "check", "--json")
	var rep struct {
		Tier   int `json:"tier"`
		Checks []struct {
			ID, Status, Summary, Remediation string
		} `json:"checks"`
	}
	if err := json.Unmarshal([]byte(c.stdout), &rep); err != nil {
		t.Fatalf("check --json: %v (exit %d, %q)", err, c.code, c.stderr)
	}
	named := false
	for _, it := range rep.Checks {
		named = named || (it.Status == "fail" && strings.Contains(it.Summary+it.Remediation, "--security-opt seccomp="))
	}
	if rep.Tier != 0 || c.code != 1 || !named {
		t.Errorf("check under the filter: tier %d exit %d, a failed item naming the seccomp fix: %v\n%s", rep.Tier, c.code, named, c.stdout)
	}
}
