package plan

import (
	"cmp"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"

	"golang.org/x/sys/unix"

	"github.com/sandbox-run/sandbox-run/internal/fault"
	"github.com/sandbox-run/sandbox-run/internal/hostwalk"
	"github.com/sandbox-run/sandbox-run/internal/protect"
	"github.com/sandbox-run/sandbox-run/mount"
	"github.com/sandbox-run/sandbox-run/pathguard"
	"github.com/sandbox-run/sandbox-run/policy"
	"github.com/sandbox-run/sandbox-run/report"
)

// SystemPaths are mounted read-only (or recreated as the same symlink) when
// the host has them. Nothing else of the host's tree is visible.
var SystemPaths = policy.SystemReadable() // one list: policy judges settings' read denies against it

// procReadOnly and procHidden are /proc entries that are not namespaced:
// they act on the whole host. The list is the one container runtimes use.
var (
	procReadOnly = []string{"/proc/bus", "/proc/fs", "/proc/irq", "/proc/sys", "/proc/sysrq-trigger"}
	procHidden   = []string{"/proc/acpi", "/proc/asound", "/proc/kcore", "/proc/keys", "/proc/kmsg",
		"/proc/latency_stats", "/proc/sched_debug", "/proc/scsi", "/proc/timer_list", "/proc/timer_stats"}
)

// Plan is the mount plan of one run and the host-side handles it holds:
// the layout (Mounts, Late) that bwrap binds and gVisor translates, and
// what the report says of it. Its Files are the descriptors bwrap binds
// by (--ro-bind-fd/--bind-fd). The plan creates nothing in the user's
// tree: Prot.Watched are the protected paths that were missing (see
// package protect). A mechanism reads the fields and may append to
// Mounts (through Bind), Notes and, for a root file system of its own,
// rewrite Mounts and Late; it never re-vets what the plan vetted.
type Plan struct {
	// Guard is the pathguard that vetted every source of the plan; later
	// binds (the proxies' sockets, the git hint) are vetted by it.
	Guard *pathguard.Guard
	// Mounts is the layout, in the order the package doc gives:
	// each bind of a vetted source carries its descriptor number when
	// ByFD, else FD -1 and the path.
	Mounts []mount.Step
	// Files are the opened sources, in the order of their descriptor
	// numbers, starting at FDBase; Close releases them.
	Files []*os.File
	// FDBase is the descriptor number of Files[0] in bwrap.
	FDBase int
	// ByFD says the binds are made by descriptor (bwrap has --bind-fd).
	ByFD bool
	// Paths are the report's lists: the writable dirs, the --read
	// paths, the protected paths held read-only and those watched.
	Paths
	// Notes are the report's notes on the layout (warnings included).
	Notes []string
	// Prot is what package protect journals and guards for the run.
	Prot protect.State
	// Quarantined is what the run's start neutralised of earlier runs
	// (set by Start).
	Quarantined []report.Quarantined
	// Late are mounts made after every other (before / is made
	// read-only): remounts of the sandbox's own file systems under which
	// other binds need mount points.
	Late []mount.Step
	// Tmpfs is the report's list of the sandbox's own file systems.
	Tmpfs []report.TmpfsReport
	// Scan and WScan are the socket searches of the --read paths and of
	// the writable directories.
	Scan  ReadScan
	WScan ReadScan
	// Own are sandbox-run's state dirs among the writable ones (sessions'
	// homes, shared caches): only sandboxes write there, so no host
	// process's socket is to be covered, and a large cache would exhaust
	// the search's budget.
	Own []string
}

// Close releases the plan's Files. It may be called more than once.
func (pl *Plan) Close() {
	for _, f := range pl.Files {
		f.Close()
	}
	pl.Files = nil
}

// Bind adds a bind of the vetted source r at dst, after New (the
// proxies' sockets, the git hint). Where bwrap can, it binds by a
// descriptor that pathguard opened and checked to be the very inode the
// walk vetted, so no later swap of the path changes what is mounted.
func (pl *Plan) Bind(kind mount.Kind, r pathguard.Resolution, dst string) error {
	m := mount.Step{Kind: kind, Src: r.Path, Dst: dst, FD: -1}
	if pl.ByFD {
		f, err := r.Open()
		if err != nil {
			return err
		}
		m.FD = pl.FDBase + len(pl.Files)
		pl.Files = append(pl.Files, f)
	}
	pl.Mounts = append(pl.Mounts, m)
	return nil
}

// BindSocket binds a Unix socket from outside (the egress or LLM proxy) at
// dst, vetted like any read-only bind: never one inside a writable dir.
func (pl *Plan) BindSocket(src, dst string) error {
	r, err := pl.Guard.CheckRead(src)
	if err != nil {
		return GuardErr(err)
	}
	if !r.Exists {
		return fault.New("socket "+src, "does not exist", "start the proxy that serves it")
	}
	if err := pl.Bind(mount.ROBind, r, dst); err != nil {
		return fault.New("cannot open socket "+src, err.Error(), "start the proxy that serves it")
	}
	return nil
}

// resolveSelf resolves a path inside a writable directory that is bound
// onto itself (a protected path or a directory pinned on the way to one).
// CheckDest has already refused any link on the way.
func resolveSelf(g *pathguard.Guard, p string) (pathguard.Resolution, error) {
	if err := g.CheckDest(p); err != nil {
		return pathguard.Resolution{}, err
	}
	r, err := pathguard.Resolve(p)
	if err != nil {
		return r, err
	}
	if !r.Exists || r.Path != p {
		return r, fmt.Errorf("%s changed while it was checked", p)
	}
	return r, nil
}

// New builds the mount plan for p in three steps: gatherFacts learns
// what of the host the plan needs (the one step that looks at the host),
// layOut translates it into the mounts (no system call), and the plan
// opens, in order, the sources bwrap binds by descriptor. ids is the host
// uid/gid the sandbox runs under; byFD says bwrap can bind by descriptor,
// sizeOption that it knows --size. On error, everything the partial plan
// holds is released.
func New(p policy.Policy, own []string, byFD bool, fdBase int, uid, gid int, sizeOption bool) (*Plan, error) {
	return NewLending(nil, p, own, byFD, fdBase, uid, gid, sizeOption, "")
}

// NewLending is New for a run that lends lent's owner to uid/gid
// (--map-owner; "" for none): lent need not be writable for uid/gid. Its
// walks go through rv's memo (nil: none).
func NewLending(rv *pathguard.Resolver, p policy.Policy, own []string, byFD bool, fdBase int, uid, gid int, sizeOption bool, lent string) (*Plan, error) {
	f, g, err := gatherFacts(rv, p, own, uid, gid, lent)
	if err != nil {
		return nil, err
	}
	l, err := layOut(p, f, byFD, sizeOption, fdBase)
	if err != nil {
		return nil, err
	}
	pl := &Plan{
		Guard: g, Mounts: l.mounts, Late: l.late, FDBase: fdBase, ByFD: byFD,
		Paths: Paths{Writable: l.writable, ReadOnly: l.readOnly, Protected: l.protected, Watched: l.watched}, Notes: l.notes,
		Prot:  protect.State{Watched: l.watched, Gits: f.gits, Walk: f.prot.walk},
		Tmpfs: l.tmpfs, Scan: f.scan, WScan: f.wscan, Own: own,
	}
	for _, s := range l.sources {
		fh, err := s.res.Open()
		if err != nil {
			pl.Close()
			return nil, fault.New(s.what, err.Error(), s.fix)
		}
		pl.Files = append(pl.Files, fh)
	}
	return pl, nil
}

// gatherFacts gathers the host facts of p's layout: it vets the writable
// dirs and every source with pathguard, inspects the system paths and
// /proc, checks that uid/gid can reach what is bound, searches the --read
// paths and the writable dirs (but own) for sockets and FIFOs and walks
// the writable dirs for git directories. It refuses what cannot be laid
// out safely; it opens nothing and mounts nothing.
func gatherFacts(rv *pathguard.Resolver, p policy.Policy, own []string, uid, gid int, lent string) (*hostFacts, *pathguard.Guard, error) {
	g, err := rv.Guard(p.Writable())
	if err != nil {
		if werr := writableMissing(p); werr != nil {
			return nil, nil, werr
		}
		return nil, nil, GuardErr(err)
	}
	// A writable directory named through a symlink would be mounted at its
	// real path, not where the caller (and the command's cwd) named it.
	for _, w := range p.Writable() {
		if r, err := rv.Resolve(w); err == nil && r.Exists && r.Path != w {
			return nil, nil, fault.New("writable dir "+w, "is reached through a symlink; it resolves to "+r.Path,
				"pass the real path, --workdir "+r.Path+" (or --write)")
		}
	}
	f := &hostFacts{writable: g.Writable()}
	var writable []string
	for _, w := range f.writable {
		writable = append(writable, w.Path)
	}
	if err := f.gatherSystem(g); err != nil {
		return nil, nil, err
	}
	f.gatherProc()
	searchable := map[string]bool{}
	for _, src := range p.Read {
		if err := f.addRead(g, src, uid, gid, searchable, hostwalk.DefaultScanLimits()); err != nil {
			return nil, nil, err
		}
	}
	for _, w := range writable {
		// The lent directory is written as its owner (--map-owner):
		// only the way to it is checked.
		if err := AccessibleVia(rv, w, uid, gid, w != lent, searchable); err != nil {
			if w != p.Workdir {
				err = notLendable(err, w, uid, gid)
			}
			return nil, nil, err
		}
	}
	f.prot.Own = own
	// The two walks of the writable dirs, for git directories (f.prot,
	// f.gits) and for sockets and FIFOs (f.wscan), share each writable
	// dir's own opening and listing (tops, made first) and nothing below
	// it; on a large tree they are mostly the kernel listing directories:
	// they run side by side. Their errors are reported in the same order
	// as before.
	tops := hostwalk.ListTops(writable, max(hostwalk.MaxEntries, hostwalk.DefaultScanLimits().Entries))
	defer tops.Close()
	scanned := make(chan error, 1)
	go func() { scanned <- f.scanWritable(rv, writable, own, hostwalk.DefaultScanLimits(), tops) }()
	perr := f.gatherProtect(p, g, writable, tops)
	serr := <-scanned
	if err := cmp.Or(perr, serr); err != nil {
		return nil, nil, err
	}
	return f, g, nil
}

// gatherSystem learns which SystemPaths the host has, which of them are
// symbolic links (and to what), and vets the others as read-only sources.
//
// Their kinds come from one listing of / (kinds) instead of an lstat each;
// when / cannot be listed, each is lstat'ed. Either way a directory is then
// walked by CheckRead and pinned by Resolution.Open, as before.
func (f *hostFacts) gatherSystem(g *pathguard.Guard) error {
	var ks hostwalk.Kinds
	for _, sp := range SystemPaths {
		kind, err := systemKind(&ks, sp)
		if err != nil {
			return fault.New("cannot inspect "+sp, err.Error(), "check the host's root file system")
		}
		if kind == hostwalk.KindMissing {
			continue
		}
		if kind == hostwalk.KindLink {
			t, err := os.Readlink(sp)
			if err != nil {
				return fault.New("cannot read link "+sp, err.Error(), "check the host's root file system")
			}
			f.system = append(f.system, systemFact{path: sp, isLink: true, target: t})
			continue
		}
		r, err := g.CheckRead(sp)
		if err != nil {
			return GuardErr(err)
		}
		f.system = append(f.system, systemFact{path: sp, res: r})
	}
	return nil
}

// systemKind is the kind of the system path sp, from ks's listing of its
// parent, else from an lstat whose errors other than ENOENT are returned.
func systemKind(ks *hostwalk.Kinds, sp string) (hostwalk.Kind, error) {
	if kind, ok := ks.Lookup(sp); ok {
		return kind, nil
	}
	fi, err := os.Lstat(sp)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return hostwalk.KindMissing, nil
	case err != nil:
		return hostwalk.KindMissing, err
	case fi.Mode()&fs.ModeSymlink != 0:
		return hostwalk.KindLink, nil
	}
	return hostwalk.KindFile, nil
}

// gatherProc learns which of procReadOnly and procHidden the host's /proc
// has, and which of the latter are directories.
//
// They are looked up in one listing of /proc (kinds), not a stat each;
// none of them is a link, and one that were would be looked up by stat.
func (f *hostFacts) gatherProc() {
	var ks hostwalk.Kinds
	kind := func(pp string) hostwalk.Kind {
		k := ks.Kind(pp)
		if k == hostwalk.KindLink {
			var st unix.Stat_t
			switch {
			case unix.Stat(pp, &st) != nil:
				k = hostwalk.KindMissing
			case st.Mode&unix.S_IFMT == unix.S_IFDIR:
				k = hostwalk.KindDir
			default:
				k = hostwalk.KindFile
			}
		}
		return k
	}
	for _, pp := range procReadOnly {
		if kind(pp) != hostwalk.KindMissing {
			f.procRO = append(f.procRO, pp)
		}
	}
	for _, pp := range procHidden {
		if k := kind(pp); k != hostwalk.KindMissing {
			f.procHide = append(f.procHide, procFact{path: pp, dir: k == hostwalk.KindDir})
		}
	}
}

// Permits reports whether the permission bits of mode, on a file owned
// by owner and group, grant uid/gid every access in want (4 read, 2
// write, 1 search or execute), as the kernel decides for a process with
// no supplementary group, ACL or capability: the owner's class, else the
// group's, else others'.
func Permits(mode, owner, group uint32, uid, gid int, want uint32) bool {
	var bits uint32
	switch {
	case int(owner) == uid:
		bits = mode >> 6
	case int(group) == gid:
		bits = mode >> 3
	default:
		bits = mode
	}
	return bits&7&want == want
}

// AccessibleAs checks, from mode bits, that uid/gid can reach p (search on
// every ancestor) and, when write is set, write it. It matters when
// sandbox-run is root and bwrap runs under an unprivileged uid: bwrap would
// otherwise fail with a bare "Permission denied". ACLs are not read; a
// directory an ACL opens is refused here. searchable, when not nil, holds
// the directories already found searchable in this run, so that many binds
// under one tree stat its ancestors once.
func AccessibleAs(p string, uid, gid int, write bool, searchable map[string]bool) error {
	return AccessibleVia(nil, p, uid, gid, write, searchable)
}

// AccessibleVia is AccessibleAs looking the directories up through rv's
// memo (nil: none), which the plan's walks have mostly filled already.
func AccessibleVia(rv *pathguard.Resolver, p string, uid, gid int, write bool, searchable map[string]bool) error {
	if os.Geteuid() != 0 {
		return nil
	}
	check := func(path string, want uint32) (bool, error) {
		st, err := statVia(rv, path)
		if err != nil {
			return false, err
		}
		return Permits(st.Mode, st.Uid, st.Gid, uid, gid, want), nil
	}
	dir := filepath.Dir(p)
	for !searchable[dir] {
		ok, err := check(dir, 1)
		if err != nil {
			return fault.New("cannot inspect "+dir, err.Error(), "check the path")
		}
		if !ok {
			return fault.New(fmt.Sprintf("%s is not reachable for uid %d", p, uid),
				fmt.Sprintf("sandbox-run runs as root, so the sandbox runs as uid %d, which cannot search %s", uid, dir),
				fmt.Sprintf("chmod o+x %s, or pass --user with a uid that can", dir))
		}
		if searchable != nil {
			searchable[dir] = true
		}
		if dir == "/" {
			break
		}
		dir = filepath.Dir(dir)
	}
	if write {
		ok, err := check(p, 3)
		if err != nil {
			return fault.New("cannot inspect "+p, err.Error(), "pass a directory that exists")
		}
		if !ok {
			return fault.New(fmt.Sprintf("%s is not writable for uid %d", p, uid),
				fmt.Sprintf("sandbox-run runs as root, so the sandbox runs as uid %d, never as host root", uid),
				notWritableFix(p, uid, gid))
		}
	}
	return nil
}

// statVia is stat(2) of path through rv's memo (nil, or a path that is not
// absolute and clean: the system call itself).
func statVia(rv *pathguard.Resolver, path string) (*syscall.Stat_t, error) {
	if rv != nil && filepath.IsAbs(path) && filepath.Clean(path) == path {
		fi, err := rv.Stat(path)
		if err != nil {
			return nil, err
		}
		if st, ok := fi.Sys().(*syscall.Stat_t); ok {
			return st, nil
		}
	}
	var st unix.Stat_t
	if err := unix.Stat(path, &st); err != nil {
		return nil, err
	}
	return &syscall.Stat_t{Mode: st.Mode, Uid: st.Uid, Gid: st.Gid}, nil
}

// writableMissing names the flag and the fix when a writable directory is
// missing or not a directory: pathguard refuses it either way, in its own
// words, and this only finds the plain-language reason (nil when none).
func writableMissing(p policy.Policy) error {
	for _, w := range p.Writable() {
		flag := "--write"
		switch w {
		case p.Workdir:
			flag = "--workdir"
		case p.Home:
			flag = "--home"
		}
		fi, err := os.Stat(w)
		switch {
		case errors.Is(err, fs.ErrNotExist):
			return fault.New(flag+" "+w, "does not exist", "create it (mkdir -p "+w+") or leave out "+flag+" "+w)
		case err == nil && !fi.IsDir():
			return fault.New(flag+" "+w, "is a file, not a directory", "name a directory (a writable directory is bound whole)")
		}
	}
	return nil
}

// GuardErr turns a pathguard refusal into a setup error: one line naming
// the bind, the link, the writable dir and the fix.
func GuardErr(err error) error {
	var ee *pathguard.EscapeError
	if errors.As(err, &ee) {
		why, fix := ee.Reason()
		return &fault.Error{What: "refused", Why: why, Fix: fix, Err: err}
	}
	return fault.New("cannot vet a bind", err.Error(), "check that every --workdir, --write and --read path exists")
}

// ShownInside reports whether a host path is visible inside a bwrap
// sandbox under p: a system path, a writable or a --read path.
func ShownInside(p policy.Policy) func(string) bool {
	dirs := append(append(append([]string(nil), SystemPaths...), p.Writable()...), p.Read...)
	return func(path string) bool {
		for _, d := range dirs {
			if policy.Within(path, d) {
				return true
			}
		}
		return false
	}
}
