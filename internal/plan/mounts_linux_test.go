package plan

import (
	"errors"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/sandbox-run/sandbox-run/bwrap"
	"github.com/sandbox-run/sandbox-run/internal/fault"
	"github.com/sandbox-run/sandbox-run/internal/hostwalk"
	"github.com/sandbox-run/sandbox-run/internal/sandboxtest"
	"github.com/sandbox-run/sandbox-run/mount"
	"github.com/sandbox-run/sandbox-run/pathguard"
	"github.com/sandbox-run/sandbox-run/policy"
	"github.com/sandbox-run/sandbox-run/report"
)

// TestLayoutInvariants checks, for every golden shape and feature set, the
// rules the layout's order and kinds stand for, independently of the
// golden text: a golden accepted by mistake still fails here.
func TestLayoutInvariants(t *testing.T) {
	for _, fs := range bwrapFeatureSets(t) {
		for _, sh := range layoutShapes() {
			t.Run(sh.name+"/"+fs.name, func(t *testing.T) {
				p := sh.p.WithDefaults()
				l, err := layOut(p, sh.host.facts(p), fs.feat.BindFD, fs.feat.Size, fdBinds)
				if err != nil {
					t.Fatal(err)
				}
				checkLayout(t, p, l, fs.feat)
			})
		}
	}
}

func checkLayout(t *testing.T, p policy.Policy, l *layout, feat bwrap.Features) {
	t.Helper()
	ms := l.mounts
	last := func(pred func(mount.Step) bool) int {
		for i := len(ms) - 1; i >= 0; i-- {
			if pred(ms[i]) {
				return i
			}
		}
		return -1
	}
	// Writable dirs: one writable bind each, onto itself.
	lastWritable := -1
	for _, w := range l.writable {
		i := slices.IndexFunc(ms, func(m mount.Step) bool { return m.Dst == w })
		if i < 0 || ms[i].Kind != mount.Bind || ms[i].Src != w {
			t.Errorf("writable %s: first mount at it is %+v, want a writable bind of itself", w, ms[max(i, 0)])
		}
		lastWritable = max(lastWritable, i)
	}
	// Nothing else is writable but pins of existing directories inside a
	// writable dir, onto themselves.
	for i, m := range ms {
		if m.Kind == mount.Bind && (m.Src != m.Dst || !policy.InsideAny(m.Dst, l.writable)) {
			t.Errorf("mount %d: writable bind %+v is not a writable dir or a pin inside one", i, m)
		}
	}
	// --read paths: read-only, where named, before every writable bind.
	for _, r := range l.readOnly {
		i := last(func(m mount.Step) bool { return m.Dst == r })
		if i < 0 || ms[i].Kind != mount.ROBind || i > lastWritable {
			t.Errorf("--read %s: mount %d, want a read-only bind before the writable dirs' (%d)", r, i, lastWritable)
		}
	}
	checkLayoutHeld(t, l, lastWritable)
	checkLayoutFDs(t, l, feat)
	checkLayoutEnd(t, p, l, feat)
}

// checkLayoutHeld: protected paths are held read-only onto themselves,
// after every writable bind (which would otherwise lay the writable tree
// over them), and no watched (missing) path is a mount point.
func checkLayoutHeld(t *testing.T, l *layout, lastWritable int) {
	t.Helper()
	ms := l.mounts
	last := func(pred func(mount.Step) bool) int {
		for i := len(ms) - 1; i >= 0; i-- {
			if pred(ms[i]) {
				return i
			}
		}
		return -1
	}
	for _, pp := range l.protected {
		i := last(func(m mount.Step) bool { return m.Dst == pp })
		if i < 0 || ms[i].Kind != mount.ROBind || ms[i].Src != pp || i < lastWritable {
			t.Errorf("protected %s: mount %d %+v, want a read-only self-bind after %d", pp, i, ms[max(i, 0)], lastWritable)
		}
	}
	// A watched path is missing: a mount there would create it on the host.
	for _, w := range l.watched {
		if slices.ContainsFunc(ms, func(m mount.Step) bool { return m.Dst == w }) {
			t.Errorf("watched %s is a mount point", w)
		}
	}
}

// checkLayoutFDs: descriptor numbers are consecutive from fdBase in the
// order of the sources, every vetted bind is made by one when bwrap can,
// and none is when it cannot.
func checkLayoutFDs(t *testing.T, l *layout, feat bwrap.Features) {
	t.Helper()
	next := l.fdBase
	for i, m := range l.mounts {
		vetted := (m.Kind == mount.Bind || m.Kind == mount.ROBind) && m.Src != "/dev/null" && !policy.Within(m.Src, "/proc")
		switch {
		case !feat.BindFD && m.FD >= 0:
			t.Errorf("mount %d %+v: by descriptor, but bwrap lacks --bind-fd", i, m)
		case feat.BindFD && vetted && m.FD != next:
			t.Errorf("mount %d %+v: fd %d, want %d", i, m, m.FD, next)
		case feat.BindFD && vetted:
			if s := l.sources[next-l.fdBase]; s.res.Path != m.Src {
				t.Errorf("fd %d: source %s, mount %+v", next, s.res.Path, m)
			}
			next++
		case !vetted && m.FD >= 0:
			t.Errorf("mount %d %+v: by descriptor, but not a vetted source", i, m)
		}
	}
	if feat.BindFD && next-l.fdBase != len(l.sources) {
		t.Errorf("%d sources, %d bound by descriptor", len(l.sources), next-l.fdBase)
	}
}

// checkLayoutEnd: /tmp and /dev/shm carry the policy's sizes (and the
// report says whether bwrap enforces them), and the late mounts make /dev
// and then / read-only.
func checkLayoutEnd(t *testing.T, p policy.Policy, l *layout, feat bwrap.Features) {
	t.Helper()
	for dst, size := range map[string]int64{"/tmp": p.TmpSize, "/dev/shm": p.ShmSize} {
		i := slices.IndexFunc(l.mounts, func(m mount.Step) bool { return m.Dst == dst })
		if i < 0 || l.mounts[i].Kind != mount.Tmpfs || l.mounts[i].Size != size || size == 0 {
			t.Errorf("%s: mount %d, want a tmpfs of %d bytes", dst, i, size)
		}
		want := size
		if !feat.Size {
			want = 0
		}
		if got := report.TmpfsSize(l.tmpfs, dst); got != want {
			t.Errorf("%s: report says %d bytes, want %d (bwrap --size %v)", dst, got, want, feat.Size)
		}
	}
	want := []mount.Step{{Kind: mount.RemountRO, Dst: "/dev", FD: -1}, {Kind: mount.RemountRO, Dst: "/", FD: -1}}
	if !slices.Equal(l.late, want) {
		t.Errorf("late %+v, want %+v", l.late, want)
	}
}

// TestLayoutRefuses: the layout refuses what it cannot lay out safely
// from the facts alone, with a setup error naming the path and a fix.
func TestLayoutRefuses(t *testing.T) {
	res := func(p string) pathguard.Resolution { return fakeRes(p) }
	for _, tt := range []struct {
		name string
		p    policy.Policy
		host fakeHost
		want string
	}{
		{"read of /", policy.Policy{Workdir: proj, Read: []string{"/"}},
			fakeHost{reads: map[string]readFact{"/": {name: "/", res: res("/")}}}, "--read /: would lay the host's /proc"},
		{"read of /tmp", policy.Policy{Workdir: proj, Read: []string{"/tmp"}},
			fakeHost{reads: map[string]readFact{"/tmp": {name: "/tmp", res: res("/tmp")}}}, "host's /tmp"},
		{"read below /proc", policy.Policy{Workdir: proj, Read: []string{"/proc/1"}},
			fakeHost{reads: map[string]readFact{"/proc/1": {name: "/proc/1", res: res("/proc/1")}}}, "host's /proc"},
		{"read resolving to /run", policy.Policy{Workdir: proj, Read: []string{"/srv/r"}},
			fakeHost{reads: map[string]readFact{"/srv/r": {name: "/srv/r", res: res("/run")}}}, "resolves to /run"},
		{"read missing", policy.Policy{Workdir: proj, Read: []string{"/srv/gone"}},
			fakeHost{reads: map[string]readFact{"/srv/gone": {name: "/srv/gone", res: pathguard.Resolution{Path: "/srv/gone"}}}}, "does not exist"},
		{"protect outside", policy.Policy{Workdir: proj, Protect: []string{"/etc/passwd"}}, fakeHost{}, "not inside a writable directory"},
		{"protected link", policy.Policy{Workdir: proj},
			fakeHost{kinds: map[string]hostwalk.Kind{proj + "/.bashrc": hostwalk.KindLink}, links: map[string]string{proj + "/.bashrc": "/etc/bash.bashrc"}},
			"protected path " + proj + "/.bashrc is a symbolic link (to /etc/bash.bashrc)"},
		{"link on the way", policy.Policy{Workdir: proj},
			fakeHost{kinds: map[string]hostwalk.Kind{proj + "/.github": hostwalk.KindLink}, links: map[string]string{proj + "/.github": "/tmp/x"}},
			proj + "/.github is a symbolic link"},
		{"git link", policy.Policy{Workdir: proj},
			fakeHost{gitLinks: []string{proj + "/.git"}, links: map[string]string{proj + "/.git": "/srv/repo.git"}},
			"git directory " + proj + "/.git is a symbolic link (to /srv/repo.git)"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			p := tt.p.WithDefaults()
			f := tt.host.facts(p)
			_, err := layOut(p, f, true, true, fdBinds)
			var se *fault.Error
			if !errors.As(err, &se) || !strings.Contains(err.Error(), tt.want) || se.Fix == "" {
				t.Fatalf("layOut = %v, want a setup error saying %q with a fix", err, tt.want)
			}
		})
	}
	// The control: the same host without the offending fact lays out.
	p := policy.Policy{Workdir: proj, Read: []string{"/srv/r"}}.WithDefaults()
	f := fakeHost{reads: map[string]readFact{"/srv/r": {name: "/srv/r", res: res("/srv/r")}}}.facts(p)
	if _, err := layOut(p, f, false, false, fdBinds); err != nil {
		t.Fatalf("control: %v", err)
	}
}

// TestLayoutHeldNeedsResolution: a path the layout would bind onto itself
// with no vetted resolution among the facts is refused, not bound by an
// unvetted path.
func TestLayoutHeldNeedsResolution(t *testing.T) {
	p := policy.Policy{Workdir: proj}.WithDefaults()
	f := fakeHost{kinds: map[string]hostwalk.Kind{proj + "/.bashrc": hostwalk.KindFile}}.facts(p)
	if _, err := layOut(p, f, false, false, fdBinds); err != nil {
		t.Fatalf("control, with the resolution: %v", err)
	}
	delete(f.prot.self, proj+"/.bashrc")
	if _, err := layOut(p, f, false, false, fdBinds); err == nil || !strings.Contains(err.Error(), ".bashrc") {
		t.Fatalf("layOut = %v, want a refusal naming .bashrc", err)
	}
}

// TestGatheredFactsMatchModel: the facts gathered from a real tree give the
// same mounts in the writable dir as the facts the goldens' model states
// for that tree: the model the goldens rest on is what gatherFacts sees.
func TestGatheredFactsMatchModel(t *testing.T) {
	w := t.TempDir()
	for _, d := range []string{".git/hooks", ".git/objects", ".git/refs", ".git/info", ".vscode", "wt", "sub"} {
		if err := os.MkdirAll(filepath.Join(w, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	for _, f := range []string{".git/HEAD", ".git/config", ".bashrc", "wt/.git"} {
		if err := os.WriteFile(filepath.Join(w, f), []byte("ref: refs/heads/main\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	sandboxtest.SocketInode(t, filepath.Join(w, "sub", "dev.sock"))
	p := policy.Policy{Workdir: w}.WithDefaults()
	got, _, err := gatherFacts(nil, p, nil, os.Getuid(), os.Getgid(), "")
	if err != nil {
		t.Fatal(err)
	}
	model := fakeHost{
		kinds: map[string]hostwalk.Kind{w + "/.git": hostwalk.KindDir, w + "/.git/hooks": hostwalk.KindDir, w + "/.git/config": hostwalk.KindFile,
			w + "/.git/info": hostwalk.KindDir, w + "/.vscode": hostwalk.KindDir, w + "/.bashrc": hostwalk.KindFile, w + "/wt": hostwalk.KindDir, w + "/wt/.git": hostwalk.KindFile},
		gitDirs: []string{w + "/.git"}, gitFiles: []string{w + "/wt/.git"},
		covered: []string{w + "/sub/dev.sock"},
	}.facts(p)
	inside := func(f *hostFacts) []mount.Step {
		l, err := layOut(p, f, true, true, fdBinds)
		if err != nil {
			t.Fatal(err)
		}
		var out []mount.Step
		for _, m := range l.mounts {
			if policy.Within(m.Dst, w) {
				out = append(out, m)
			}
		}
		return out
	}
	gm, mm := inside(got), inside(model)
	if !slices.Equal(gm, mm) {
		t.Errorf("gathered facts lay out\n%v\nthe model\n%v", gm, mm)
	}
	if len(mm) < 8 {
		t.Errorf("the model lays out %d mounts in the workdir, want the workdir, pins, holds and the cover", len(mm))
	}
}

// TestLayoutProtectCoverage lays out random trees (each component of each
// protected path and of a git directory's held parts a directory, a file or
// missing, consistently) and checks that every protected path is held,
// lies below a held path, or is watched, besides the invariants of
// checkLayout: no protected name falls through the layout, whatever exists.
func TestLayoutProtectCoverage(t *testing.T) {
	rng := rand.New(rand.NewPCG(17, 2))
	sets := bwrapFeatureSets(t)
	for i := range 300 {
		p := policy.Policy{Workdir: proj, Protect: []string{"a/b/c", "secrets.env"}}.WithDefaults()
		kinds := map[string]hostwalk.Kind{}
		var want []string
		addPath := func(full string) {
			want = append(want, full)
			rel, _ := filepath.Rel(proj, full)
			cur := proj
			for _, part := range strings.Split(rel, "/") {
				cur = filepath.Join(cur, part)
				if k, seen := kinds[cur]; seen {
					if k != hostwalk.KindDir {
						return
					}
					continue
				}
				k := hostwalk.Kind(rng.IntN(3)) // missing, dir or file
				kinds[cur] = k
				if k != hostwalk.KindDir {
					return
				}
			}
		}
		for _, n := range p.ProtectedNames() {
			addPath(filepath.Join(proj, n))
		}
		var gitDirs []string
		if rng.IntN(2) == 0 {
			kinds[proj+"/.git"] = hostwalk.KindDir
			gitDirs = append(gitDirs, proj+"/.git")
			for _, part := range policy.GitHeld() {
				addPath(filepath.Join(proj, ".git", part))
			}
		}
		for k, v := range kinds {
			if v == hostwalk.KindMissing {
				delete(kinds, k)
			}
		}
		fs := sets[i%len(sets)]
		f := fakeHost{kinds: kinds, gitDirs: gitDirs}.facts(p)
		l, err := layOut(p, f, fs.feat.BindFD, fs.feat.Size, fdBinds)
		if err != nil {
			t.Fatalf("tree %d %v: %v", i, kinds, err)
		}
		checkLayout(t, p, l, fs.feat)
		for _, w := range want {
			held := slices.ContainsFunc(l.protected, func(h string) bool { return policy.Within(w, h) })
			if !held && !slices.Contains(l.watched, w) {
				t.Fatalf("tree %d %v: %s neither held nor watched (protected %v, watched %v)", i, kinds, w, l.protected, l.watched)
			}
		}
	}
}
