package plan

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/sandbox-run/sandbox-run/internal/fault"
	"github.com/sandbox-run/sandbox-run/internal/hostwalk"
	"github.com/sandbox-run/sandbox-run/internal/sandboxtest"
	"github.com/sandbox-run/sandbox-run/mount"
	"github.com/sandbox-run/sandbox-run/policy"
)

// TestPlanWritableCoversSockets: every socket and FIFO in a writable dir
// (git's fsmonitor socket in .git/ among them) has /dev/null bound over it
// after every bind at or below the dir (a protected .git held onto itself
// would otherwise lay the host's uncovered tree over the cover); a --write
// dir inside the workdir is searched once with it; a link to a socket
// elsewhere is not followed.
func TestPlanWritableCoversSockets(t *testing.T) {
	w, outside := sandboxtest.SpecialTree(t)
	if err := os.MkdirAll(filepath.Join(w, ".git", "hooks"), 0o755); err != nil {
		t.Fatal(err)
	}
	sandboxtest.SocketInode(t, filepath.Join(w, ".git", "fsmonitor--daemon.ipc"))
	p := policy.Policy{Workdir: w, Write: []string{filepath.Join(w, "a")}}.WithDefaults()
	pl, err := New(p, nil, false, 9, os.Getuid(), os.Getgid(), true)
	if err != nil {
		t.Fatal(err)
	}
	defer pl.Close()
	lastBind := -1
	for i, m := range pl.Mounts {
		if m.Src != "/dev/null" && policy.Within(m.Dst, w) {
			lastBind = i
		}
	}
	want := []string{"agent.sock", "a/pipe", "a/b/docker.sock", ".git/fsmonitor--daemon.ipc"}
	for _, rel := range want {
		dst := filepath.Join(w, rel)
		i := slices.IndexFunc(pl.Mounts, func(m mount.Step) bool { return m.Dst == dst })
		if i < 0 || pl.Mounts[i].Src != "/dev/null" || pl.Mounts[i].Kind != mount.ROBind || i < lastBind {
			t.Errorf("%s: not covered by /dev/null after the last bind in the workdir (index %d, last bind %d)", dst, i, lastBind)
		}
	}
	if len(pl.WScan.Covered) != len(want) {
		t.Errorf("covered %q, want the %d of %q once each", pl.WScan.Covered, len(want), want)
	}
	if slices.ContainsFunc(pl.Mounts, func(m mount.Step) bool { return policy.Within(m.Dst, outside) }) {
		t.Errorf("the link to %s was followed", outside)
	}
	rep := pl.WScan.Report(len(pl.Writable))
	// root: agent.sock, a, link.sock, .git; a: b, pipe, file; b: docker.sock;
	// .git: hooks, fsmonitor--daemon.ipc; hooks: the placeholders protect
	// made, if any (they are entries like any other).
	if rep == nil || rep.Entries < 10 || rep.Paths != 2 || len(rep.Covered) != len(want) {
		t.Errorf("report %+v, want at least 10 entries, 2 paths and %d covered", rep, len(want))
	}
}

// TestPlanWritableBounds: a writable dir over the search's bounds is
// refused (the run would otherwise hand over what the search did not
// reach), and the covered bound is shared with the --read search.
func TestPlanWritableBounds(t *testing.T) {
	w, _ := sandboxtest.SpecialTree(t)
	for _, tt := range []struct {
		name string
		lim  hostwalk.ScanLimits
		used int // sockets the --read search already covered
		want string
	}{
		{"entries", hostwalk.ScanLimits{Entries: 6, Depth: 64, Covered: 64}, 0, "more than 6 directory entries"},
		{"depth", hostwalk.ScanLimits{Entries: 100, Depth: 2, Covered: 64}, 0, "deeper than 2"},
		{"covered", hostwalk.ScanLimits{Entries: 100, Depth: 64, Covered: 4}, 2, "more than 4 sockets"},
		{"within", hostwalk.ScanLimits{Entries: 100, Depth: 64, Covered: 5}, 2, ""},
	} {
		t.Run(tt.name, func(t *testing.T) {
			f := &hostFacts{}
			f.scan.Covered = make([]string, tt.used)
			err := f.scanWritable(nil, []string{w}, nil, tt.lim, nil)
			var se *fault.Error
			switch {
			case tt.want == "" && err != nil:
				t.Fatalf("within the bounds: %v", err)
			case tt.want == "" && len(f.wscan.Covered) != 3:
				t.Fatalf("covered %q, want 3", f.wscan.Covered)
			case tt.want == "":
			case !errors.As(err, &se) || !strings.Contains(err.Error(), tt.want) || !strings.Contains(se.Fix, "narrower"):
				t.Fatalf("error %v, want a setup error saying %q with a fix", err, tt.want)
			}
		})
	}
}

// TestPlanOwnStateNotSearched: sandbox-run's own state dirs among the
// writable ones (sessions' homes, shared caches) are not searched; the
// same dir as a plain --write dir is (the control).
func TestPlanOwnStateNotSearched(t *testing.T) {
	w, cache := t.TempDir(), t.TempDir()
	sandboxtest.SocketInode(t, filepath.Join(cache, "left.sock"))
	for _, own := range [][]string{nil, {cache}} {
		p := policy.Policy{Workdir: w, Write: []string{cache}}.WithDefaults()
		pl, err := New(p, own, false, 9, os.Getuid(), os.Getgid(), true)
		if err != nil {
			t.Fatal(err)
		}
		covered := slices.Contains(pl.WScan.Covered, filepath.Join(cache, "left.sock"))
		pl.Close()
		if covered != (own == nil) {
			t.Errorf("own %v: socket covered %v", own, covered)
		}
	}
}
