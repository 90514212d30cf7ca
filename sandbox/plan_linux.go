package sandbox

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/sandbox-run/sandbox-run/bwrap"
	"github.com/sandbox-run/sandbox-run/pathguard"
	"github.com/sandbox-run/sandbox-run/policy"
)

// systemPaths are mounted read-only (or recreated as the same symlink) when
// the host has them. Nothing else of the host's tree is visible.
var systemPaths = []string{"/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32", "/etc"}

// procReadOnly and procHidden are /proc entries that are not namespaced:
// they act on the whole host. The list is the one container runtimes use.
var (
	procReadOnly = []string{"/proc/bus", "/proc/fs", "/proc/irq", "/proc/sys", "/proc/sysrq-trigger"}
	procHidden   = []string{"/proc/acpi", "/proc/asound", "/proc/kcore", "/proc/keys", "/proc/kmsg",
		"/proc/latency_stats", "/proc/sched_debug", "/proc/scsi", "/proc/timer_list", "/proc/timer_stats"}
)

// plan is the mount plan of one run and the host-side handles it holds.
// Its files are the descriptors bwrap binds by (--ro-bind-fd/--bind-fd);
// placeholders are what the run created in the user's tree to hold
// missing protected paths, removed by cleanup.
type plan struct {
	guard        *pathguard.Guard
	mounts       []bwrap.Mount
	files        []*os.File // in the order of their fd numbers, starting at fdBase
	fdBase       int
	byFD         bool
	placeholders []string // deepest last
	writable     []string
	readOnly     []string
	protected    []string
	notes        []string
	// late are mounts made after every other (before / is made
	// read-only): remounts of the sandbox's own file systems under which
	// other binds need mount points.
	late  []bwrap.Mount
	tmpfs []TmpfsReport
	scan  readScan // the --read paths' socket search
	wscan readScan // the writable directories' socket search
	// own are sandbox-run's state dirs among the writable ones (sessions'
	// homes, shared caches): only sandboxes write there, so no host
	// process's socket is to be covered, and a large cache would exhaust
	// the search's budget.
	own []string
}

func (pl *plan) close() {
	for _, f := range pl.files {
		f.Close()
	}
	pl.files = nil
}

// cleanup removes the placeholders the run created, deepest first, and only
// while they are still empty: what the command put there is left alone.
func (pl *plan) cleanup() {
	for i := len(pl.placeholders) - 1; i >= 0; i-- {
		p := pl.placeholders[i]
		fi, err := os.Lstat(p)
		if err != nil {
			continue
		}
		if fi.Mode().IsRegular() && fi.Size() == 0 || fi.IsDir() {
			os.Remove(p) // fails, as it should, on a non-empty directory
		}
	}
	pl.placeholders = nil
}

// bind adds a bind of the vetted source r at dst. Where bwrap can, it binds
// by a descriptor that pathguard opened and checked to be the very inode the
// walk vetted, so no later swap of the path changes what is mounted.
func (pl *plan) bind(kind bwrap.MountKind, r pathguard.Resolution, dst string) error {
	m := bwrap.Mount{Kind: kind, Src: r.Path, Dst: dst, FD: -1}
	if pl.byFD {
		f, err := r.Open()
		if err != nil {
			return err
		}
		m.FD = pl.fdBase + len(pl.files)
		pl.files = append(pl.files, f)
	}
	pl.mounts = append(pl.mounts, m)
	return nil
}

// bindSocket binds a Unix socket from outside (the egress or LLM proxy) at
// dst, vetted like any read-only bind: never one inside a writable dir.
func (pl *plan) bindSocket(src, dst string) error {
	r, err := pl.guard.CheckRead(src)
	if err != nil {
		return guardErr(err)
	}
	if !r.Exists {
		return setupErr("socket "+src, "does not exist", "start the proxy that serves it")
	}
	if err := pl.bind(bwrap.ROBind, r, dst); err != nil {
		return setupErr("cannot open socket "+src, err.Error(), "start the proxy that serves it")
	}
	return nil
}

// resolveSelf resolves a path inside a writable directory that is bound
// onto itself (a protected path or a directory pinned on the way to one).
// CheckDest has already refused any link on the way.
func (pl *plan) resolveSelf(g *pathguard.Guard, p string) (pathguard.Resolution, error) {
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

// newPlan builds the mount plan for p. ids is the host uid/gid the sandbox
// runs under; byFD says bwrap can bind by descriptor. On error, everything
// the partial plan holds is released.
func newPlan(p policy.Policy, own []string, byFD bool, fdBase int, uid, gid int, sizeOption bool) (_ *plan, err error) {
	pl := &plan{byFD: byFD, fdBase: fdBase, own: own}
	defer func() {
		if err != nil {
			pl.close()
			pl.cleanup()
		}
	}()
	if !byFD {
		pl.notes = append(pl.notes, "binds by path: race window (bwrap lacks --ro-bind-fd)")
	}

	g, err := pathguard.New(p.Writable())
	if err != nil {
		if werr := writableMissing(p); werr != nil {
			return nil, werr
		}
		return nil, guardErr(err)
	}
	pl.guard = g
	searchable := map[string]bool{}
	writable := g.Writable()
	// A writable directory named through a symlink would be mounted at its
	// real path, not where the caller (and the command's cwd) named it.
	for _, w := range p.Writable() {
		if r, err := pathguard.Resolve(w); err == nil && r.Exists && r.Path != w {
			return nil, setupErr("writable dir "+w, "is reached through a symlink; it resolves to "+r.Path,
				"pass the real path, --workdir "+r.Path+" (or --write)")
		}
	}
	for _, w := range writable {
		pl.writable = append(pl.writable, w.Path)
	}

	for _, sp := range systemPaths {
		fi, err := os.Lstat(sp)
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			return nil, setupErr("cannot inspect "+sp, err.Error(), "check the host's root file system")
		}
		if fi.Mode()&fs.ModeSymlink != 0 {
			t, err := os.Readlink(sp)
			if err != nil {
				return nil, setupErr("cannot read link "+sp, err.Error(), "check the host's root file system")
			}
			pl.mounts = append(pl.mounts, bwrap.Mount{Kind: bwrap.Symlink, Src: t, Dst: sp, FD: -1})
			continue
		}
		r, err := g.CheckRead(sp)
		if err != nil {
			return nil, guardErr(err)
		}
		if err := pl.bind(bwrap.ROBind, r, sp); err != nil {
			return nil, setupErr("cannot open "+sp, err.Error(), "check the host's root file system")
		}
	}

	pl.mounts = append(pl.mounts, bwrap.Mount{Kind: bwrap.Proc, Dst: "/proc", FD: -1})
	for _, pp := range procReadOnly {
		if _, err := os.Stat(pp); err == nil {
			pl.mounts = append(pl.mounts, bwrap.Mount{Kind: bwrap.ROBind, Src: pp, Dst: pp, FD: -1})
		}
	}
	for _, pp := range procHidden {
		fi, err := os.Stat(pp)
		if err != nil {
			continue
		}
		if fi.IsDir() {
			pl.mounts = append(pl.mounts,
				bwrap.Mount{Kind: bwrap.Tmpfs, Dst: pp, FD: -1, Size: 4096},
				bwrap.Mount{Kind: bwrap.RemountRO, Dst: pp, FD: -1})
		} else {
			pl.mounts = append(pl.mounts, bwrap.Mount{Kind: bwrap.ROBind, Src: "/dev/null", Dst: pp, FD: -1})
		}
	}
	pl.addOwnMounts(p, sizeOption)

	for _, src := range p.Read {
		if err := pl.addRead(g, src, uid, gid, searchable, defaultScanLimits); err != nil {
			return nil, err
		}
	}
	for _, w := range writable {
		if err := accessibleAs(w.Path, uid, gid, true, searchable); err != nil {
			return nil, err
		}
		if err := pl.bind(bwrap.Bind, w, w.Path); err != nil {
			return nil, setupErr("cannot open writable dir "+w.Path, err.Error(), "pass a directory that exists")
		}
	}
	if err := pl.protect(p, g, pl.writable); err != nil {
		return nil, err
	}
	if err := pl.coverWritable(defaultScanLimits); err != nil {
		return nil, err
	}
	return pl, nil
}

// protect holds every protected path read-only. A missing one gets an empty
// placeholder of its kind, created here (so the run knows it made it) and
// removed by cleanup; every existing directory on the way is bound onto
// itself, which makes it a mount point that cannot be renamed or removed
// from inside (so ".git -> g2, then a new .git" fails with EBUSY).
func (pl *plan) protect(p policy.Policy, g *pathguard.Guard, writable []string) error {
	pinned := map[string]bool{}
	for _, w := range writable {
		names := append(policy.DefaultProtected(), p.Protect...)
		for _, name := range names {
			if filepath.IsAbs(name) {
				rel, err := filepath.Rel(w, name)
				if err != nil || rel == ".." || strings.HasPrefix(rel, "../") || rel == "." {
					continue
				}
				name = rel
			}
			if err := pl.protectOne(g, w, filepath.Clean(name), pinned); err != nil {
				return err
			}
		}
	}
	for _, name := range p.Protect {
		if filepath.IsAbs(name) && !insideAny(name, writable) {
			return setupErr("--protect "+name, "not inside a writable directory", "protect paths inside --workdir or a --write dir")
		}
	}
	return nil
}

func (pl *plan) protectOne(g *pathguard.Guard, w, name string, pinned map[string]bool) error {
	hold := func(kind bwrap.MountKind, p string) error {
		r, err := pl.resolveSelf(g, p)
		if err != nil {
			return guardErr(err)
		}
		if err := pl.bind(kind, r, p); err != nil {
			return setupErr("cannot open protected path "+p, err.Error(), "check the path")
		}
		return nil
	}
	parts := strings.Split(name, "/")
	cur := w
	for i, part := range parts {
		cur = filepath.Join(cur, part)
		last := i == len(parts)-1
		fi, err := os.Lstat(cur)
		switch {
		case err == nil && fi.Mode()&fs.ModeSymlink != 0:
			t, _ := os.Readlink(cur)
			return setupErr("protected path "+cur+" is a symbolic link (to "+t+")",
				"a link there would make the sandbox or a later tool follow it", "remove the link (rm "+cur+") or replace it with the real file")
		case err == nil && !last && !fi.IsDir():
			// A file where a directory is expected, such as the .git file of
			// a worktree: it names where git looks, so it is held itself.
			if !pinned[cur] {
				pinned[cur] = true
				if err := hold(bwrap.ROBind, cur); err != nil {
					return err
				}
				pl.protected = append(pl.protected, cur)
			}
			return nil
		case err == nil && !last:
			if !pinned[cur] {
				pinned[cur] = true
				if err := hold(bwrap.Bind, cur); err != nil {
					return err
				}
			}
		case err == nil && last:
			if !pinned[cur] {
				pinned[cur] = true
				if err := hold(bwrap.ROBind, cur); err != nil {
					return err
				}
				pl.protected = append(pl.protected, cur)
			}
		case errors.Is(err, fs.ErrNotExist):
			dir := !last || policy.ProtectedIsDir(name)
			if err := makePlaceholder(cur, dir); err != nil {
				return setupErr("cannot hold missing protected path "+cur, err.Error(), "make the writable directory writable for sandbox-run")
			}
			pl.placeholders = append(pl.placeholders, cur)
			pinned[cur] = true
			kind := bwrap.ROBind
			if !last {
				kind = bwrap.Bind
			} else {
				pl.protected = append(pl.protected, cur)
			}
			if err := hold(kind, cur); err != nil {
				return err
			}
		default:
			return setupErr("cannot inspect protected path "+cur, err.Error(), "check the directory's permissions")
		}
	}
	return nil
}

func makePlaceholder(p string, dir bool) error {
	if dir {
		return unix.Mkdir(p, 0o755)
	}
	fd, err := unix.Open(p, unix.O_CREAT|unix.O_EXCL|unix.O_NOFOLLOW|unix.O_WRONLY|unix.O_CLOEXEC, 0o644)
	if err != nil {
		return err
	}
	return unix.Close(fd)
}

// accessibleAs checks, from mode bits, that uid/gid can reach p (search on
// every ancestor) and, when write is set, write it. It matters when
// sandbox-run is root and bwrap runs under an unprivileged uid: bwrap would
// otherwise fail with a bare "Permission denied". ACLs are not read; a
// directory an ACL opens is refused here. searchable, when not nil, holds
// the directories already found searchable in this run, so that many binds
// under one tree stat its ancestors once.
func accessibleAs(p string, uid, gid int, write bool, searchable map[string]bool) error {
	if os.Geteuid() != 0 {
		return nil
	}
	check := func(path string, want uint32) (bool, error) {
		var st unix.Stat_t
		if err := unix.Stat(path, &st); err != nil {
			return false, err
		}
		mode := st.Mode & 0o777
		var bits uint32
		switch {
		case int(st.Uid) == uid:
			bits = mode >> 6
		case int(st.Gid) == gid:
			bits = mode >> 3
		default:
			bits = mode
		}
		return bits&want == want, nil
	}
	dir := filepath.Dir(p)
	for !searchable[dir] {
		ok, err := check(dir, 1)
		if err != nil {
			return setupErr("cannot inspect "+dir, err.Error(), "check the path")
		}
		if !ok {
			return setupErr(fmt.Sprintf("%s is not reachable for uid %d", p, uid),
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
			return setupErr("cannot inspect "+p, err.Error(), "pass a directory that exists")
		}
		if !ok {
			return setupErr(fmt.Sprintf("%s is not writable for uid %d", p, uid),
				fmt.Sprintf("sandbox-run runs as root, so the sandbox runs as uid %d, never as host root", uid),
				fmt.Sprintf("chown -R %d:%d %s, or pass --user UID[:GID] of the directory's owner", uid, gid, p))
		}
	}
	return nil
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
			return setupErr(flag+" "+w, "does not exist", "create it (mkdir -p "+w+") or leave out "+flag+" "+w)
		case err == nil && !fi.IsDir():
			return setupErr(flag+" "+w, "is a file, not a directory", "name a directory (a writable directory is bound whole)")
		}
	}
	return nil
}

// guardErr turns a pathguard refusal into a setup error: one line naming
// the bind, the link, the writable dir and the fix.
func guardErr(err error) error {
	var ee *pathguard.EscapeError
	if errors.As(err, &ee) {
		// pathguard's line ends in ": <fix>"; keep our what/why/fix shape.
		msg := strings.TrimPrefix(ee.Error(), "pathguard: ")
		why, fix := msg, ""
		if i := strings.LastIndex(msg, ": "); i >= 0 {
			why, fix = msg[:i], msg[i+2:]
		}
		return &SetupError{What: "refused", Why: why, Fix: fix}
	}
	return setupErr("cannot vet a bind", err.Error(), "check that every --workdir, --write and --read path exists")
}

func insideAny(p string, dirs []string) bool {
	for _, d := range dirs {
		if within(p, d) {
			return true
		}
	}
	return false
}

// within reports whether p is w or lies below it, component-wise.
func within(p, w string) bool {
	if p == w || w == "/" {
		return true
	}
	return strings.HasPrefix(p, w+"/")
}

func errText(err error) string {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return pe.Err.Error()
	}
	return err.Error()
}

// shownInside reports whether a host path is visible inside a bwrap
// sandbox under p: a system path, a writable or a --read path.
func shownInside(p policy.Policy) func(string) bool {
	dirs := append(append(append([]string(nil), systemPaths...), p.Writable()...), p.Read...)
	return func(path string) bool {
		for _, d := range dirs {
			if within(path, d) {
				return true
			}
		}
		return false
	}
}
