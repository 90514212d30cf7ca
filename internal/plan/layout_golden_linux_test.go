package plan

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/sandbox-run/sandbox-run/bwrap"
	"github.com/sandbox-run/sandbox-run/internal/hostwalk"
	"github.com/sandbox-run/sandbox-run/internal/plan/plantest"
	"github.com/sandbox-run/sandbox-run/internal/protect"
	"github.com/sandbox-run/sandbox-run/mount"
	"github.com/sandbox-run/sandbox-run/pathguard"
	"github.com/sandbox-run/sandbox-run/policy"
	"github.com/sandbox-run/sandbox-run/report"
)

var update = flag.Bool("update", false, "rewrite testdata/layout/*.golden from the current layout")

// bwrapFeatureSets are the bwrap versions the layout is golden-tested
// for, each derived the way sandbox-run derives it (bwrap.Parse of the
// --help output): Debian 12's 0.8.0 help text, with the options an older
// or an upstream build lacks taken out (the same derivation as bwrap's
// TestParseFeatureSets), and the by-path plan of gVisor.
func bwrapFeatureSets(t *testing.T) []struct {
	name string
	feat bwrap.Features
} {
	t.Helper()
	help, err := os.ReadFile("../../bwrap/testdata/help-0.8.0-debian.txt")
	if err != nil {
		t.Fatal(err)
	}
	without := func(opts ...string) string {
		var keep []string
		for _, line := range strings.Split(string(help), "\n") {
			if f := strings.Fields(line); len(f) > 0 && slices.Contains(opts, f[0]) {
				continue
			}
			keep = append(keep, line)
		}
		return strings.Join(keep, "\n")
	}
	sets := []struct{ name, version, help string }{
		{"0.4", "bubblewrap 0.4.0", without("--bind-fd", "--ro-bind-fd", "--disable-userns", "--assert-userns-disabled", "--clearenv", "--size", "--perms", "--chmod")},
		{"0.6", "bubblewrap 0.6.2", without("--bind-fd", "--ro-bind-fd", "--disable-userns", "--assert-userns-disabled", "--size")},
		{"0.8-debian", "bubblewrap 0.8.0", without()},
		{"0.12", "bubblewrap 0.12.0", without()},
	}
	var out []struct {
		name string
		feat bwrap.Features
	}
	for _, s := range sets {
		info, err := bwrap.Parse("/usr/bin/bwrap", s.version, s.help)
		if err != nil {
			t.Fatal(err)
		}
		if info.Required() != nil {
			t.Fatalf("%s: %v", s.name, info.Required())
		}
		out = append(out, struct {
			name string
			feat bwrap.Features
		}{s.name, info.Features})
	}
	// gVisor lays out by path (runsc has no bind by descriptor) and sizes
	// its own tmpfs: the plan its mechanism translates.
	out = append(out, struct {
		name string
		feat bwrap.Features
	}{"bypath", bwrap.Features{Size: true}})
	return out
}

// fakeHost describes a host for the layout: a Debian 12 root (merged
// /usr, no /lib32 or /libx32), its /proc, and, per shape, what exists in
// the writable dirs and what the searches and the walk found.
type fakeHost struct {
	kinds    map[string]hostwalk.Kind // in the writable dirs; a path not named is missing
	links    map[string]string        // symbolic links among kinds: their targets
	gitDirs  []string
	gitFiles []string
	gitLinks []string
	reads    map[string]readFact // by the name given to --read
	covered  []string            // what the writable dirs' search found, in order
	partial  bool                // the walk for git directories stopped at a bound
}

func (h fakeHost) facts(p policy.Policy) *hostFacts {
	f := &hostFacts{
		system: []systemFact{
			{path: "/usr", res: fakeRes("/usr")},
			{path: "/bin", isLink: true, target: "usr/bin"},
			{path: "/sbin", isLink: true, target: "usr/sbin"},
			{path: "/lib", isLink: true, target: "usr/lib"},
			{path: "/lib64", isLink: true, target: "usr/lib64"},
			{path: "/etc", res: fakeRes("/etc")},
		},
		procRO: slices.Clone(procReadOnly),
		procHide: []procFact{{"/proc/acpi", true}, {"/proc/asound", true}, {"/proc/kcore", false}, {"/proc/keys", false},
			{"/proc/kmsg", false}, {"/proc/latency_stats", false}, {"/proc/sched_debug", false}, {"/proc/scsi", true},
			{"/proc/timer_list", false}},
	}
	for _, w := range p.Writable() {
		if !slices.ContainsFunc(f.writable, func(r pathguard.Resolution) bool { return r.Path == w }) {
			f.writable = append(f.writable, fakeRes(w))
		}
	}
	for _, r := range p.Read {
		f.reads = append(f.reads, h.reads[r])
	}
	f.prot = protectFacts{kinds: map[string]hostwalk.Kind{}, Found: protect.Found{Links: h.links, GitDirs: h.gitDirs, GitFiles: h.gitFiles,
		GitLinks: h.gitLinks}, self: map[string]pathguard.Resolution{}, walk: report.WalkReport{Complete: !h.partial}}
	for _, w := range f.writable {
		f.prot.kinds[w.Path] = hostwalk.KindDir
	}
	for p, k := range h.kinds {
		f.prot.kinds[p] = k
		if k == hostwalk.KindDir || k == hostwalk.KindFile {
			f.prot.self[p] = fakeRes(p)
		}
	}
	f.wscan.Covered = h.covered
	return f
}

// fakeRes is a vetted resolution of an existing path that is its own real
// path (the layout reads Path and Exists only).
func fakeRes(p string) pathguard.Resolution { return pathguard.Resolution{Path: p, Exists: true} }

const (
	proj  = "/home/u/proj"
	cache = "/home/u/.cache/tool"
)

// postBind is a bind the run adds after the layout (the proxies' sockets,
// the git hint), as pl.bind does: after every mount of the layout, before
// the late ones.
type postBind struct{ src, dst string }

type layoutShape struct {
	name   string
	p      policy.Policy
	host   fakeHost
	post   []postBind
	asPid1 bool // init runs (forwarded sockets): bwrap's own PID 1 is not kept
}

func layoutShapes() []layoutShape {
	dataRead := readFact{name: "/srv/data", res: fakeRes("/srv/data"), found: []hostwalk.SpecialFound{
		{Rel: "run/app.sock", Kind: "socket"}, {Rel: "queue", Kind: "fifo"}}}
	return []layoutShape{
		{name: "workdir", p: policy.Policy{Workdir: proj}},
		{name: "write-read", p: policy.Policy{Workdir: proj, Write: []string{cache}, Read: []string{"/srv/data", "/srv/ref.txt", "/opt/tool"}},
			host: fakeHost{reads: map[string]readFact{
				"/srv/data":    {name: "/srv/data", res: fakeRes("/srv/data")},
				"/srv/ref.txt": {name: "/srv/ref.txt", res: fakeRes("/srv/ref.txt")},
				// A --read named through a link: mounted where it was
				// named, from the inode it resolved to.
				"/opt/tool": {name: "/opt/tool", res: fakeRes("/opt/tool-1.2")},
			}}},
		{name: "protected", p: policy.Policy{Workdir: proj, Protect: []string{"secrets.env", proj + "/deploy"}, Unprotect: []string{".envrc"}},
			host: fakeHost{partial: true, kinds: map[string]hostwalk.Kind{
				proj + "/.bashrc": hostwalk.KindFile, proj + "/.vscode": hostwalk.KindDir, proj + "/.github": hostwalk.KindDir,
				proj + "/.config": hostwalk.KindDir, proj + "/.config/fish": hostwalk.KindDir, proj + "/secrets.env": hostwalk.KindFile,
				proj + "/.envrc": hostwalk.KindFile, // unprotected: not held
			}}},
		{name: "git", p: policy.Policy{Workdir: proj}, host: fakeHost{
			kinds: map[string]hostwalk.Kind{
				proj + "/.git": hostwalk.KindDir, proj + "/.git/hooks": hostwalk.KindDir, proj + "/.git/config": hostwalk.KindFile,
				proj + "/.git/info": hostwalk.KindDir,                                       // info/attributes missing: watched
				proj + "/wt":        hostwalk.KindDir, proj + "/wt/.git": hostwalk.KindFile, // a worktree's .git file
				proj + "/vendor": hostwalk.KindDir, proj + "/vendor/lib": hostwalk.KindDir, proj + "/vendor/lib/.git": hostwalk.KindDir,
				proj + "/vendor/lib/.git/config": hostwalk.KindFile, proj + "/vendor/lib/.git/hooks": hostwalk.KindDir,
			},
			gitDirs:  []string{proj + "/.git", proj + "/vendor/lib/.git"},
			gitFiles: []string{proj + "/wt/.git"},
		}, post: []postBind{{"/home/u/.cache/sandbox-run/githint-0123abcd", gitHintDir + "/git"}}},
		{name: "sockets", p: policy.Policy{Workdir: proj, Read: []string{"/srv/data", "/srv/data"}},
			host: fakeHost{
				kinds:   map[string]hostwalk.Kind{proj + "/.git": hostwalk.KindDir, proj + "/.git/config": hostwalk.KindFile, proj + "/.git/hooks": hostwalk.KindDir},
				gitDirs: []string{proj + "/.git"},
				reads:   map[string]readFact{"/srv/data": dataRead},
				covered: []string{proj + "/.git/fsmonitor--daemon.ipc", proj + "/dev.sock"},
			}},
		// A --write dir inside the workdir: bound over it, and the
		// protected names apply inside each writable dir.
		{name: "nested-write", p: policy.Policy{Workdir: proj, Write: []string{proj + "/build"}},
			host: fakeHost{kinds: map[string]hostwalk.Kind{proj + "/.bashrc": hostwalk.KindFile, proj + "/build/.npmrc": hostwalk.KindFile}}},
		// A session's home (--home): one more writable dir, with the
		// protected names inside it (.bashrc there is held).
		{name: "home", p: policy.Policy{Workdir: proj, Home: "/home/u/.local/state/sandbox-run/homes/s1"},
			host: fakeHost{kinds: map[string]hostwalk.Kind{"/home/u/.local/state/sandbox-run/homes/s1/.bashrc": hostwalk.KindFile}}},
		{name: "sizes", p: policy.Policy{Workdir: proj, TmpSize: 1 << 30, ShmSize: 16 << 20}},
		{name: "proxy-sockets", p: policy.Policy{Workdir: proj, AllowHosts: []string{"example.com"}, LLMSocket: "/run/llm/llm.sock"},
			post: []postBind{
				{"/run/user/1000/sandbox-run/run-1/egress.sock", egressInside},
				{"/run/user/1000/sandbox-run/run-1/llm.sock", llmInside},
			}, asPid1: true},
	}
}

// TestLayoutGolden: for each bwrap feature set and each policy shape, the
// mount list, the descriptors and what the report says of them are those
// in testdata/layout, and the plan as the mechanisms translate it is the
// fixture in testdata/plans that their own goldens are made from
// (package plantest). go test ./internal/plan -run TestLayoutGolden
// -update rewrites both; review each diff, then rewrite the mechanisms'
// goldens the same way.
func TestLayoutGolden(t *testing.T) {
	for _, fs := range bwrapFeatureSets(t) {
		for _, sh := range layoutShapes() {
			t.Run(sh.name+"/"+fs.name, func(t *testing.T) {
				name := sh.name + "-" + fs.name
				got, fx := renderLayout(t, sh, fs.name, fs.feat)
				fxb, err := plantest.Encode(fx)
				if err != nil {
					t.Fatal(err)
				}
				plantest.Golden(t, filepath.Join("testdata", "layout", name+".golden"), got, *update)
				plantest.Golden(t, filepath.Join(plantest.Dir(), name+".json"), fxb, *update)
			})
		}
	}
}

// renderLayout lays out one shape for one feature set and prints it; the
// fixture is the same plan as the mechanisms read it.
func renderLayout(t *testing.T, sh layoutShape, set string, feat bwrap.Features) ([]byte, plantest.Fixture) {
	t.Helper()
	p := sh.p.WithDefaults()
	l, err := layOut(p, sh.host.facts(p), feat.BindFD, feat.Size, fdBinds)
	if err != nil {
		t.Fatal(err)
	}
	for _, b := range sh.post {
		l.bind(mount.ROBind, fakeRes(b.src), b.dst, "", "")
	}
	mounts := append(slices.Clone(l.mounts), l.late...)
	var b strings.Builder
	fmt.Fprintf(&b, "# layout of shape %q for bwrap %s (features %+v)\n", sh.name, set, feat)
	fmt.Fprintf(&b, "# generated by go test ./internal/plan -run TestLayoutGolden -update; review every change\n\n")
	b.WriteString("mounts:\n")
	for i, m := range mounts {
		fmt.Fprintf(&b, "  %2d %s\n", i, mountLine(m))
	}
	b.WriteString("descriptors:\n")
	for i, s := range l.sources {
		fmt.Fprintf(&b, "  %d = %s\n", l.fdBase+i, s.res.Path)
	}
	for _, r := range []struct {
		name string
		list []string
	}{{"writable", l.writable}, {"read-only", l.readOnly}, {"protected", l.protected}, {"watched", l.watched}, {"notes", l.notes}} {
		fmt.Fprintf(&b, "%s:\n", r.name)
		for _, s := range r.list {
			fmt.Fprintf(&b, "  %s\n", s)
		}
	}
	b.WriteString("tmpfs:\n")
	for _, tf := range l.tmpfs {
		fmt.Fprintf(&b, "  %s size=%d: %s\n", tf.Path, tf.Size, tf.Enforced)
	}
	fx := plantest.Fixture{Name: sh.name + "-" + set, Features: feat, Workdir: p.Workdir, AsPid1: sh.asPid1, FDBase: l.fdBase, Mounts: mounts,
		Writable: l.writable, ReadOnly: l.readOnly, Protected: l.protected, Watched: l.watched}
	return []byte(b.String()), fx
}

func mountLine(m mount.Step) string {
	s := m.Kind.String()
	if m.FD >= 0 {
		s += fmt.Sprintf(" fd=%d(%s)", m.FD, m.Src)
	} else if m.Src != "" {
		s += " " + m.Src
	}
	s += " -> " + m.Dst
	if m.Size > 0 {
		s += fmt.Sprintf(" size=%d", m.Size)
	}
	return s
}
