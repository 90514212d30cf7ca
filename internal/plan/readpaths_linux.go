package plan

import (
	"fmt"
	"path/filepath"
	"slices"
	"time"

	"github.com/sandbox-run/sandbox-run/internal/fault"
	"github.com/sandbox-run/sandbox-run/internal/hostwalk"
	"github.com/sandbox-run/sandbox-run/mount"
	"github.com/sandbox-run/sandbox-run/pathguard"
	"github.com/sandbox-run/sandbox-run/policy"
	"github.com/sandbox-run/sandbox-run/report"
)

// ownPlaces are where the sandbox has file systems of its own (/proc, /dev,
// /tmp) or keeps the host's out (/sys, /run hold the host's devices, its
// services' sockets and its users' runtime dirs). A --read that is one of
// them, or lies above one (only "/" does), would lay the host's tree over
// the sandbox's own or bring the host's into it: the host's /tmp files and
// /proc/1 would be visible inside. Such a --read is refused rather than
// reordered: with the host's / bound first the sandbox's mounts could win,
// but the socket search would then have to cover the whole host file
// system, which is beyond its bound on any real host.
var ownPlaces = []string{"/proc", "/dev", "/tmp", "/sys", "/run"}

// ownSubtrees are the places below which nothing of the host's may be read
// either: a host process's /proc/PID or the host's /dev/shm is not a file to
// hand in. Below /tmp, /sys and /run a path is named on purpose and is bound
// over the sandbox's view like any --read.
var ownSubtrees = []string{"/proc", "/dev"}

// readCoversOwn returns the own place that the path p (absolute, clean)
// would replace or expose, and false when it touches none.
func readCoversOwn(p string) (string, bool) {
	if p == "/" {
		return "/proc, /dev, /tmp, /sys and /run", true
	}
	for _, o := range ownPlaces {
		if p == o {
			return o, true
		}
	}
	for _, o := range ownSubtrees {
		if policy.Within(p, o) {
			return o, true
		}
	}
	return "", false
}

// ReadScan sums up the socket search of one run, for the report and the log.
type ReadScan struct {
	Entries int                            // the entries the search listed
	Elapsed time.Duration                  // the time it took
	Covered []string                       // paths inside the sandbox, each covered by /dev/null
	done    map[string]hostwalk.ScanResult // by real path: a path named twice is searched once
}

// addRead vets the --read path src, refuses one that would cover the
// sandbox's own mounts (at the spelling given or the one it resolves to)
// or that is a socket or FIFO itself, and searches it for sockets and
// FIFOs, which the layout covers with /dev/null where it binds src.
func (f *hostFacts) addRead(g *pathguard.Guard, src string, uid, gid int, searchable map[string]bool, lim hostwalk.ScanLimits) error {
	if own, ok := readCoversOwn(src); ok {
		return fault.New("--read "+src, "would lay the host's "+own+" over the sandbox's own or bring the host's into it",
			"pass the directories the command needs (e.g. --read /srv/data); the sandbox has its own /proc, /dev and /tmp")
	}
	r, err := g.CheckRead(src)
	if err != nil {
		return GuardErr(err)
	}
	if err := vetRead(src, r); err != nil {
		return err
	}
	if err := AccessibleVia(g.Resolver(), r.Path, uid, gid, false, searchable); err != nil {
		return err
	}
	res, seen := f.scan.done[r.Path]
	if !seen {
		lim.UsedEntries, lim.UsedCovered = f.scan.Entries, len(f.scan.Covered)
		res, err = hostwalk.ScanSpecial(g.Resolver(), r.Path, lim)
		f.scan.Entries += res.Entries
		f.scan.Elapsed += res.Elapsed
		if f.scan.done == nil {
			f.scan.done = map[string]hostwalk.ScanResult{}
		}
		f.scan.done[r.Path] = res
	}
	if err != nil {
		return fault.New("--read "+src, "cannot be searched for Unix sockets and FIFOs: "+fault.Reason(err),
			"pass narrower --read paths (the search stops at "+fmt.Sprint(lim.Entries)+" entries, "+fmt.Sprint(lim.Depth)+" levels)")
	}
	if len(res.Found) == 1 && res.Found[0].Rel == "." {
		return fault.New("--read "+src, "is a "+res.Found[0].Kind+": a read-only bind still lets the command talk to what is behind it",
			"drop --read "+src+"; handing a socket or FIFO in is not supported")
	}
	for _, sf := range res.Found {
		if dst := filepath.Join(src, sf.Rel); !slices.Contains(f.scan.Covered, dst) {
			f.scan.Covered = append(f.scan.Covered, dst)
		}
	}
	f.reads = append(f.reads, readFact{name: src, res: r, found: res.Found})
	return nil
}

// addOwnMounts mounts the sandbox's /dev and /tmp and records each file
// system in memory with its ceiling. /dev is bwrap's (device nodes, a
// devpts, no size option, owned by the sandbox's uid), so it is made
// read-only once every mount under it is made (late); /dev/shm, a
// directory of /dev until then, gets a tmpfs of its own with a size. The
// root, bwrap's unsized tmpfs, is made read-only last. Without bwrap's
// --size neither /tmp nor /dev/shm has a ceiling, and the report says so.
func (l *layout) addOwnMounts(p policy.Policy, sizeOption bool) {
	l.mounts = append(l.mounts,
		mount.Step{Kind: mount.Dev, Dst: "/dev", FD: -1},
		mount.Step{Kind: mount.Tmpfs, Dst: "/dev/shm", FD: -1, Size: p.ShmSize},
		mount.Step{Kind: mount.Tmpfs, Dst: "/tmp", FD: -1, Size: p.TmpSize})
	l.late = append(l.late,
		mount.Step{Kind: mount.RemountRO, Dst: "/dev", FD: -1},
		mount.Step{Kind: mount.RemountRO, Dst: "/", FD: -1})
	how, tmp, shm := "tmpfs size= (bwrap --size)", p.TmpSize, p.ShmSize
	if !sizeOption {
		how, tmp, shm = "none: bwrap lacks --size", 0, 0
		l.notes = append(l.notes, "/tmp and /dev/shm are not size-capped (bwrap lacks --size)")
	}
	l.tmpfs = append(l.tmpfs,
		report.TmpfsReport{Path: "/tmp", Size: tmp, Enforced: how},
		report.TmpfsReport{Path: "/dev/shm", Size: shm, Enforced: how},
		report.TmpfsReport{Path: "/dev", Enforced: "read-only (bwrap --remount-ro): nothing can be written but device nodes"},
		report.TmpfsReport{Path: "/", Enforced: "read-only (bwrap --remount-ro)"})
}

// Report is the search's part of the isolation report; nil when there
// is no path to search.
func (s ReadScan) Report(paths int) *report.ReadScanReport {
	if paths == 0 {
		return nil
	}
	return &report.ReadScanReport{Paths: paths, Entries: s.Entries, Seconds: s.Elapsed.Seconds(), Covered: s.Covered}
}
