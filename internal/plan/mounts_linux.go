package plan

import (
	"path/filepath"

	"github.com/sandbox-run/sandbox-run/internal/fault"
	"github.com/sandbox-run/sandbox-run/internal/hostwalk"
	"github.com/sandbox-run/sandbox-run/internal/protect"
	"github.com/sandbox-run/sandbox-run/mount"
	"github.com/sandbox-run/sandbox-run/pathguard"
	"github.com/sandbox-run/sandbox-run/policy"
	"github.com/sandbox-run/sandbox-run/report"
)

// hostFacts is what the mount layout needs to know of the host. It is
// gathered by gatherFacts, which stats, resolves, searches and walks, and
// read by layOut, which does none of that: the same facts give the same
// mounts. Every path in it was vetted by pathguard when it was gathered.
type hostFacts struct {
	writable []pathguard.Resolution // the writable dirs, in the guard's order
	system   []systemFact           // the SystemPaths the host has, in order
	procRO   []string               // the procReadOnly entries the host has
	procHide []procFact             // the procHidden entries the host has
	reads    []readFact             // one per --read path, in the policy's order
	prot     protectFacts
	gits     []protect.GitID // the git directories, .git files and links, for the journal
	// scan and wscan are the socket searches of the --read paths and of
	// the writable dirs: what they cost, and (covered) the paths inside
	// the sandbox to cover with /dev/null, in order and once each.
	scan, wscan ReadScan
}

// systemFact is one system path the host has: a symbolic link (recreated
// inside as the same link) or a vetted directory (bound read-only).
type systemFact struct {
	path   string
	isLink bool
	target string               // the link's target, as it spells it
	res    pathguard.Resolution // when not a link
}

// procFact is one of procHidden the host has, and whether it is a
// directory (covered by an empty read-only tmpfs) or a file (/dev/null).
type procFact struct {
	path string
	dir  bool
}

// readFact is one --read path: as named (where it is mounted), its vetted
// resolution (what is mounted) and the sockets and FIFOs found below it.
type readFact struct {
	name  string
	res   pathguard.Resolution
	found []hostwalk.SpecialFound
}

// protectFacts is what the protect layout reads: what the walk found
// (protect.Found: the git directories, .git files and .git links, the
// targets of the links met, sandbox-run's own dirs), the kind of every
// path it asks about (a path not in kinds is missing), and the
// resolutions of the paths bound onto themselves.
type protectFacts struct {
	protect.Found
	kinds map[string]hostwalk.Kind
	self  map[string]pathguard.Resolution
	walk  report.WalkReport
}

func (pf protectFacts) kindOf(p string) hostwalk.Kind { return pf.kinds[p] }

// bindSource is a vetted source the layout binds: by descriptor (the
// plan opens res in the order of sources) when bwrap can, else by path.
// what and fix word the setup error when it cannot be opened.
type bindSource struct {
	res       pathguard.Resolution
	what, fix string
}

// layout is the mount list of one run and what the report says of it.
type layout struct {
	byFD   bool
	fdBase int
	mounts []mount.Step
	// late are mounts made after every other (before / is made read-only):
	// remounts of the sandbox's own file systems.
	late []mount.Step
	// sources are the binds made by descriptor, the k-th at fd fdBase+k;
	// empty when byFD is false.
	sources   []bindSource
	writable  []string
	readOnly  []string
	protected []string
	watched   []string
	notes     []string
	tmpfs     []report.TmpfsReport
}

// bind adds a bind of the vetted source r at dst: by the descriptor
// number the plan will give r's opened file when bwrap can bind by
// descriptor, else by r's path.
func (l *layout) bind(kind mount.Kind, r pathguard.Resolution, dst, what, fix string) {
	m := mount.Step{Kind: kind, Src: r.Path, Dst: dst, FD: -1}
	if l.byFD {
		m.FD = l.fdBase + len(l.sources)
		l.sources = append(l.sources, bindSource{res: r, what: what, fix: fix})
	}
	l.mounts = append(l.mounts, m)
}

// cover binds /dev/null over dst (a socket or FIFO, a /proc file).
func (l *layout) cover(dst string) {
	l.mounts = append(l.mounts, mount.Step{Kind: mount.ROBind, Src: "/dev/null", Dst: dst, FD: -1})
}

// layOut translates the policy and the host's facts into the mount list
// for a mechanism that binds by descriptor from fdBase when byFD and
// caps a tmpfs's size when sizeOption. It makes no system call.
//
// The order is the guarantee: system paths, /proc and its covers, the
// sandbox's /dev and /tmp, each --read path (read-only) with its sockets
// covered, the writable dirs (writable), the protected paths held onto
// themselves (read-only) over them, and last the writable dirs' sockets
// covered, so that no later bind lays the host's tree over a cover. The
// late mounts (made last by the caller) make /dev and / read-only.
func layOut(p policy.Policy, f *hostFacts, byFD, sizeOption bool, fdBase int) (*layout, error) {
	l := &layout{byFD: byFD, fdBase: fdBase}
	if !byFD {
		l.notes = append(l.notes, "binds by path: race window (bwrap lacks --ro-bind-fd)")
	}
	for _, w := range f.writable {
		l.writable = append(l.writable, w.Path)
	}
	for _, s := range f.system {
		if s.isLink {
			l.mounts = append(l.mounts, mount.Step{Kind: mount.Symlink, Src: s.target, Dst: s.path, FD: -1})
			continue
		}
		l.bind(mount.ROBind, s.res, s.path, "cannot open "+s.path, "check the host's root file system")
	}
	l.addProc(f)
	l.addOwnMounts(p, sizeOption)
	for _, r := range f.reads {
		if err := vetRead(r.name, r.res); err != nil {
			return nil, err
		}
		l.bind(mount.ROBind, r.res, r.name, "cannot open --read "+r.name, "pass a path that exists")
		for _, s := range r.found {
			// Covered again when the path is named again: the second
			// bind of it lies over the first one's covers.
			l.cover(filepath.Join(r.name, s.Rel))
		}
		l.readOnly = append(l.readOnly, r.name)
	}
	for _, w := range f.writable {
		l.bind(mount.Bind, w, w.Path, "cannot open writable dir "+w.Path, "pass a directory that exists")
	}
	if err := l.addProtected(p, f.prot); err != nil {
		return nil, err
	}
	for _, dst := range f.wscan.Covered {
		l.cover(dst)
	}
	return l, nil
}

// addProc mounts a new /proc and covers its entries that act on the whole
// host: read-only binds over procReadOnly, an empty read-only tmpfs over
// each directory of procHidden and /dev/null over each file.
func (l *layout) addProc(f *hostFacts) {
	l.mounts = append(l.mounts, mount.Step{Kind: mount.Proc, Dst: "/proc", FD: -1})
	for _, pp := range f.procRO {
		l.mounts = append(l.mounts, mount.Step{Kind: mount.ROBind, Src: pp, Dst: pp, FD: -1})
	}
	for _, ph := range f.procHide {
		if ph.dir {
			l.mounts = append(l.mounts,
				mount.Step{Kind: mount.Tmpfs, Dst: ph.path, FD: -1, Size: 4096},
				mount.Step{Kind: mount.RemountRO, Dst: ph.path, FD: -1})
			continue
		}
		l.cover(ph.path)
	}
}

// addProtected binds the protected paths (see protect.Acts): pinned
// directories onto themselves writable, held paths read-only; missing
// ones are watched, not mounted.
func (l *layout) addProtected(p policy.Policy, pf protectFacts) error {
	acts, err := protect.Acts(p, l.writable, pf.Found, pf.kindOf)
	if err != nil {
		return err
	}
	for _, a := range acts {
		switch a.Op {
		case protect.Watch:
			l.watched = append(l.watched, a.Path)
			continue
		case protect.Hold:
			l.protected = append(l.protected, a.Path)
		}
		kind := mount.ROBind
		if a.Op == protect.Pin {
			kind = mount.Bind
		}
		r, ok := pf.self[a.Path]
		if !ok || !r.Exists || r.Path != a.Path {
			return fault.New("protected path "+a.Path, "changed while it was checked", "run again")
		}
		l.bind(kind, r, a.Path, "cannot open protected path "+a.Path, "check the path")
	}
	if _, own := protect.SplitOwn(l.writable, pf.Own); len(own) > 0 {
		l.notes = append(l.notes, "protected names are not held in sessions' homes and shared caches (no host tool reads them there): a .bashrc or .npmrc the command leaves there reaches later runs of the same session or cache; git directories there are held and stripped as anywhere")
	}
	for _, u := range p.Unprotect {
		l.notes = append(l.notes, "warning: built-in protected path "+filepath.Clean(u)+" is not protected (the profile's unprotect)")
	}
	if !pf.walk.Complete {
		l.notes = append(l.notes, "warning: the walk for git directories was incomplete; a repository it did not reach is not held (see protect_walk.skipped)")
	}
	return nil
}

// vetRead refuses a --read path that would cover the sandbox's own mounts,
// at the spelling given or the one it resolves to, and one that does not
// exist.
func vetRead(src string, r pathguard.Resolution) error {
	if own, ok := readCoversOwn(src); ok {
		return fault.New("--read "+src, "would lay the host's "+own+" over the sandbox's own or bring the host's into it",
			"pass the directories the command needs (e.g. --read /srv/data); the sandbox has its own /proc, /dev and /tmp")
	}
	if !r.Exists {
		return fault.New("--read "+src, "does not exist", "pass a path that exists, or drop --read "+src)
	}
	if own, ok := readCoversOwn(r.Path); ok {
		return fault.New("--read "+src, "resolves to "+r.Path+", which is or holds the host's "+own,
			"pass the directories the command needs (e.g. --read /srv/data)")
	}
	return nil
}
