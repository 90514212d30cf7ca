package sandbox

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	llmech "github.com/sandbox-run/sandbox-run/internal/mechanism/landlock"

	"github.com/sandbox-run/sandbox-run/internal/hostnet"
	"github.com/sandbox-run/sandbox-run/internal/procid"
	"github.com/sandbox-run/sandbox-run/internal/sandboxtest"
	"github.com/sandbox-run/sandbox-run/landlock"
	"github.com/sandbox-run/sandbox-run/policy"
)

// TestKilledRunDirSwept: the directory a run keeps in TMPDIR, left by a
// run killed before it could remove it (named for a process that no
// longer runs, owned by the sandbox's uid), is removed by the next run of
// the same kind; one of a live process stays, and the run leaves none of
// its own. The kinds: the network runtime directory (--allow-host) and a
// landlock run's own TMPDIR.
func TestKilledRunDirSwept(t *testing.T) {
	for _, tc := range []struct {
		name   string
		prefix string
		p      policy.Policy
		need   func(testing.TB)
	}{
		{"network", hostnet.DirPrefix, policy.Policy{Sandbox: policy.ModeBwrap, AllowHosts: []string{"example.com"}},
			func(t testing.TB) { sandboxtest.Bwrap(t) }},
		{"landlock", llmech.TmpPrefix, policy.Policy{Sandbox: policy.ModeLandlock},
			func(t testing.TB) { sandboxtest.Landlock(t, landlock.MinABI) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tc.need(t)
			sweptByNextRun(t, tc.prefix, tc.p)
		})
	}
}

// sweptByNextRun plants a killed run's directory and a live one's named
// prefix in a TMPDIR of its own, runs p, and checks that only the live
// one is left.
func sweptByNextRun(t *testing.T, prefix string, p policy.Policy) {
	t.Helper()
	tmp := sandboxtest.WorkDir(t) // reachable by the sandbox's uid, as TMPDIR must be
	t.Setenv("TMPDIR", tmp)
	me, _, err := procid.Self()
	if err != nil {
		t.Fatal(err)
	}
	mk := func(name string) string {
		p := filepath.Join(tmp, name)
		if err := os.MkdirAll(filepath.Join(p, "sub"), 0o700); err != nil {
			t.Fatal(err)
		}
		sandboxtest.Chown(t, p)
		return p
	}
	// This process with another start time: a pid reused since, so no
	// process of that run.
	reused := me
	reused.Start++
	killed := mk(hostnet.RunDirPattern(prefix, reused) + "x")
	live := mk(hostnet.RunDirPattern(prefix, me) + "y")

	null, _ := os.Open(os.DevNull)
	defer null.Close()
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	p.Workdir = sandboxtest.WorkDir(t)
	res, err := Run(ctx, p, []string{"true"}, Options{Stdout: null, Stderr: null})
	if err != nil || res.ExitCode != 0 {
		t.Fatalf("run: %v (result %+v)", err, res)
	}
	if _, err := os.Lstat(killed); err == nil {
		t.Errorf("the killed run's directory %s is still there", killed)
	}
	ents, err := os.ReadDir(tmp)
	if err != nil {
		t.Fatal(err)
	}
	if len(ents) != 1 || filepath.Join(tmp, ents[0].Name()) != live {
		var names []string
		for _, e := range ents {
			names = append(names, e.Name())
		}
		t.Errorf("TMPDIR holds %v, want only the live run's %s", names, filepath.Base(live))
	}
}

// TestNetDirRefusesTmpdirInWritable: with TMPDIR inside the workdir, a run
// that needs a runtime directory (--allow-host) is refused before it
// makes one or sweeps there (its sockets, and the directories the sweep
// removes, would be in the command's reach). The control is the same
// TMPDIR with the workdir elsewhere: the run works and sweeps the killed
// run's directory planted there.
func TestNetDirRefusesTmpdirInWritable(t *testing.T) {
	sandboxtest.Bwrap(t)
	work := sandboxtest.WorkDir(t)
	tmp := filepath.Join(work, "tmp")
	if err := os.Mkdir(tmp, 0o755); err != nil {
		t.Fatal(err)
	}
	sandboxtest.Chown(t, tmp)
	t.Setenv("TMPDIR", tmp)
	reused, _, err := procid.Self()
	if err != nil {
		t.Fatal(err)
	}
	reused.Start++
	killed := filepath.Join(tmp, hostnet.RunDirPattern(hostnet.DirPrefix, reused)+"x")
	if err := os.Mkdir(killed, 0o700); err != nil {
		t.Fatal(err)
	}
	sandboxtest.Chown(t, killed)

	null, _ := os.Open(os.DevNull)
	defer null.Close()
	run := func(workdir string) error {
		ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
		defer cancel()
		p := policy.Policy{Workdir: workdir, Sandbox: policy.ModeBwrap, AllowHosts: []string{"example.com"}}
		res, err := Run(ctx, p, []string{"true"}, Options{Stdout: null, Stderr: null})
		if err == nil && res.ExitCode != 0 {
			err = fmt.Errorf("exit %d", res.ExitCode)
		}
		return err
	}

	err = run(work)
	if !errors.Is(err, ErrSetup) || !strings.Contains(err.Error(), "TMPDIR "+tmp) {
		t.Errorf("TMPDIR in the workdir: %v, want a setup error naming TMPDIR", err)
	}
	if ents, _ := os.ReadDir(tmp); len(ents) != 1 {
		t.Errorf("TMPDIR in the workdir: the refused run touched it (%d entries, want the planted one)", len(ents))
	}

	if err := run(sandboxtest.WorkDir(t)); err != nil {
		t.Fatalf("control, the workdir elsewhere: %v", err)
	}
	if _, err := os.Lstat(killed); err == nil {
		t.Errorf("control: the killed run's directory %s is still there", killed)
	}
}
