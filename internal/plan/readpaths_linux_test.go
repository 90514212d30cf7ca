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
	"github.com/sandbox-run/sandbox-run/pathguard"
	"github.com/sandbox-run/sandbox-run/policy"
	"github.com/sandbox-run/sandbox-run/report"
)

func TestReadCoversOwn(t *testing.T) {
	for p, want := range map[string]bool{
		"/": true, "/proc": true, "/proc/1": true, "/proc/self/root": true, "/dev": true, "/dev/shm": true,
		"/tmp": true, "/sys": true, "/run": true,
		"/tmp/x": false, "/sys/class": false, "/run/user/1000/x": false, "/usr": false, "/procx": false,
		"/devices": false, "/srv/tmp": false,
	} {
		if _, got := readCoversOwn(p); got != want {
			t.Errorf("readCoversOwn(%q) = %v, want %v", p, got, want)
		}
	}
}

// TestPlanReadCoversSockets: every socket and FIFO under a --read path has
// /dev/null bound over it, after the --read bind itself (a later mount
// covers an earlier one), at the path as named inside.
func TestPlanReadCoversSockets(t *testing.T) {
	root, _ := sandboxtest.SpecialTree(t)
	p := policy.Policy{Workdir: t.TempDir(), Read: []string{root}}.WithDefaults()
	pl, err := New(p, nil, false, 9, os.Getuid(), os.Getgid(), true)
	if err != nil {
		t.Fatal(err)
	}
	defer pl.Close()
	readAt := slices.IndexFunc(pl.Mounts, func(m mount.Step) bool { return m.Dst == root })
	if readAt < 0 {
		t.Fatalf("no bind of %s", root)
	}
	for _, rel := range []string{"agent.sock", "a/pipe", "a/b/docker.sock"} {
		dst := filepath.Join(root, rel)
		i := slices.IndexFunc(pl.Mounts, func(m mount.Step) bool { return m.Dst == dst })
		if i < 0 || pl.Mounts[i].Src != "/dev/null" || pl.Mounts[i].Kind != mount.ROBind || i < readAt {
			t.Errorf("%s: not covered by /dev/null after the --read bind (index %d, read at %d)", dst, i, readAt)
		}
		if !slices.Contains(pl.Scan.Covered, dst) {
			t.Errorf("%s missing from the covered list %q", dst, pl.Scan.Covered)
		}
	}
	if rep := pl.Scan.Report(1); rep == nil || rep.Entries != 7 || len(rep.Covered) != 3 {
		t.Errorf("report %+v, want 7 entries and 3 covered", rep)
	}
}

func TestPlanReadRefusals(t *testing.T) {
	d := t.TempDir()
	os.Symlink("/", filepath.Join(d, "rootlink"))
	os.Symlink("/proc/self", filepath.Join(d, "proclink"))
	sandboxtest.SocketInode(t, filepath.Join(d, "svc.sock"))
	deep := d
	for range hostwalk.DefaultScanLimits().Depth + 1 {
		deep = filepath.Join(deep, "d")
	}
	os.MkdirAll(deep, 0o755)
	for _, tt := range []struct{ read, want string }{
		{"/", "/proc, /dev, /tmp"},
		{"/proc", "/proc"},
		{"/dev/shm", "/dev"},
		{"/run", "/run"},
		{filepath.Join(d, "rootlink"), "resolves to /"},
		{filepath.Join(d, "proclink"), "resolves to /proc/"},
		{filepath.Join(d, "svc.sock"), "is a socket"},
		{filepath.Join(d, "d"), "deeper than 64"},
	} {
		t.Run(tt.read, func(t *testing.T) {
			p := policy.Policy{Workdir: t.TempDir(), Read: []string{tt.read}}.WithDefaults()
			_, err := New(p, nil, false, 9, os.Getuid(), os.Getgid(), true)
			var se *fault.Error
			if !errors.As(err, &se) || !strings.Contains(err.Error(), tt.want) || se.Fix == "" {
				t.Fatalf("error %v, want a setup error naming %q with a fix", err, tt.want)
			}
		})
	}
}

// TestPlanTmpfs: /tmp and /dev/shm get tmpfs mounts with the policy's
// sizes, /dev is remounted read-only late (after every bind that may need
// a mount point under it), and without --size the report claims no cap.
func TestPlanTmpfs(t *testing.T) {
	for _, sizeOption := range []bool{true, false} {
		p := policy.Policy{Workdir: t.TempDir(), ShmSize: 16 << 20}.WithDefaults()
		pl, err := New(p, nil, false, 9, os.Getuid(), os.Getgid(), sizeOption)
		if err != nil {
			t.Fatal(err)
		}
		pl.Close()
		sizes := map[string]int64{}
		for _, m := range pl.Mounts {
			if m.Kind == mount.Tmpfs {
				sizes[m.Dst] = m.Size
			}
		}
		if sizes["/dev/shm"] != 16<<20 || sizes["/tmp"] != policy.DefaultTmpSize {
			t.Errorf("tmpfs sizes %v", sizes)
		}
		dev := slices.IndexFunc(pl.Mounts, func(m mount.Step) bool { return m.Kind == mount.Dev })
		shm := slices.IndexFunc(pl.Mounts, func(m mount.Step) bool { return m.Dst == "/dev/shm" })
		if dev < 0 || shm < dev {
			t.Errorf("/dev/shm tmpfs at %d, /dev at %d: the tmpfs must follow", shm, dev)
		}
		if want := []mount.Step{{Kind: mount.RemountRO, Dst: "/dev", FD: -1}, {Kind: mount.RemountRO, Dst: "/", FD: -1}}; !slices.Equal(pl.Late, want) {
			t.Errorf("late mounts %v, want %v: /dev, then / (last) made read-only", pl.Late, want)
		}
		wantTmp, wantShm := int64(policy.DefaultTmpSize), int64(16<<20)
		if !sizeOption {
			wantTmp, wantShm = 0, 0
		}
		if got := report.TmpfsSize(pl.Tmpfs, "/tmp"); got != wantTmp {
			t.Errorf("size option %v: /tmp reported %d, want %d", sizeOption, got, wantTmp)
		}
		if got := report.TmpfsSize(pl.Tmpfs, "/dev/shm"); got != wantShm {
			t.Errorf("size option %v: /dev/shm reported %d, want %d", sizeOption, got, wantShm)
		}
		for _, tf := range pl.Tmpfs {
			if tf.Size == 0 && !strings.HasPrefix(tf.Enforced, "none") && !strings.HasPrefix(tf.Enforced, "read-only") {
				t.Errorf("%s: no size but enforced %q", tf.Path, tf.Enforced)
			}
		}
	}
}

// TestPlanReadTwice: a path named twice is searched once (the run-wide
// budget is not spent twice) and covered after each of its binds, since
// the second bind lies over the first one's covers.
func TestPlanReadTwice(t *testing.T) {
	root, _ := sandboxtest.SpecialTree(t)
	p := policy.Policy{Workdir: t.TempDir(), Read: []string{root, root}}.WithDefaults()
	pl, err := New(p, nil, false, 9, os.Getuid(), os.Getgid(), true)
	if err != nil {
		t.Fatal(err)
	}
	defer pl.Close()
	if pl.Scan.Entries != 7 || len(pl.Scan.Covered) != 3 {
		t.Errorf("entries %d, covered %q: want 7 and 3", pl.Scan.Entries, pl.Scan.Covered)
	}
	sock := filepath.Join(root, "agent.sock")
	var lastRead, lastCover int
	for i, m := range pl.Mounts {
		switch m.Dst {
		case root:
			lastRead = i
		case sock:
			lastCover = i
		}
	}
	if lastCover < lastRead {
		t.Errorf("the last bind of %s (%d) lies over the last cover of %s (%d)", root, lastRead, sock, lastCover)
	}
}

// TestScanBudgetIsPerRun: the entries budget is shared by all --read paths.
func TestScanBudgetIsPerRun(t *testing.T) {
	a, _ := sandboxtest.SpecialTree(t)
	b, _ := sandboxtest.SpecialTree(t)
	p := policy.Policy{Workdir: t.TempDir(), Read: []string{a, b}}.WithDefaults()
	f := &hostFacts{}
	g, err := pathguard.New(p.Writable())
	if err != nil {
		t.Fatal(err)
	}
	lim := hostwalk.ScanLimits{Entries: 10, Depth: 64, Covered: 64}
	if err := f.addRead(g, a, os.Getuid(), os.Getgid(), nil, lim); err != nil {
		t.Fatalf("first path, 7 of 10 entries: %v", err)
	}
	err = f.addRead(g, b, os.Getuid(), os.Getgid(), nil, lim)
	if err == nil || !strings.Contains(err.Error(), "more than 10 directory entries in all") {
		t.Fatalf("second path, 14 of 10 entries: %v, want the run-wide bound", err)
	}
}
