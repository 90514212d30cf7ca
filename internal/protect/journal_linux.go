package protect

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"github.com/sandbox-run/sandbox-run/internal/hostwalk"
	"github.com/sandbox-run/sandbox-run/internal/procid"
	"github.com/sandbox-run/sandbox-run/pathguard"
	"github.com/sandbox-run/sandbox-run/policy"
)

// A journal records what a run found at its start in its writable
// directories: the protected paths that were missing (and so could not be
// held without making a mount point in the user's tree) and the git
// directories that existed. Whatever the command created there is
// neutralised (see quarantine) once the run has ended and no other live
// run shares a writable directory with it: by the run itself as it ends,
// by the last concurrent run to end, or, when they were all killed, by the
// next run of the same user. Protection is per directory, not per run.
//
// Journals of older versions also list placeholders (empty files and
// directories that held missing paths); they are removed while they are
// still the empty inodes that run made.
type journal struct {
	PID   int    `json:"pid"`   // in the run's own pid namespace, which NS names
	Start uint64 `json:"start"` // the process's start time, in clock ticks after boot
	// NS is the run's procid token (its pid namespace): only a run in the
	// same namespace can judge its pid (see judgeJournal). "" in journals
	// of older versions, judged as they were.
	NS     string `json:"ns,omitempty"`
	BootID string `json:"boot_id"` // a journal of an earlier boot is stale whatever its pid
	// Locked: the run holds a shared flock on this file for as long as it
	// runs (holdJournal), which a run in another pid namespace probes.
	Locked bool `json:"locked,omitempty"`
	// Ended: the run is over though its process may go on (a library
	// caller, an mcp relay); its journal waits for the overlapping runs.
	Ended        bool          `json:"ended,omitempty"`
	RunID        string        `json:"run_id,omitempty"`
	Writable     []string      `json:"writable,omitempty"`
	Watched      []string      `json:"watched,omitempty"`
	Gits         []GitID       `json:"gits,omitempty"`
	Placeholders []placeholder `json:"placeholders,omitempty"`
	// Held are the existing protected paths a mechanism could not hold
	// read-only, with their snapshots in SnapshotDir (see restoreHeld).
	Held        []HeldCopy `json:"held,omitempty"`
	SnapshotDir string     `json:"snapshot_dir,omitempty"`
}

// GitID names a git directory or .git file that existed at a run's start:
// its path and inode, so that one put in its place during the run (the old
// one renamed away, a new one made) counts as new.
type GitID struct {
	Path string `json:"path"`
	Dev  uint64 `json:"dev"`
	Ino  uint64 `json:"ino"`
}

// GitIDs identifies paths as they are now (lstat: a link is named as
// itself, never followed); one that is gone is left out.
func GitIDs(paths []string) []GitID {
	out := make([]GitID, 0, len(paths))
	for _, p := range paths {
		var st unix.Stat_t
		if unix.Lstat(p, &st) == nil {
			out = append(out, GitID{Path: p, Dev: st.Dev, Ino: st.Ino})
		}
	}
	return out
}

// placeholder names what a run made: the inode at Path, told from a later
// one of the same number (inode numbers are reused) by its change time.
type placeholder struct {
	Path  string `json:"path"`
	Dev   uint64 `json:"dev"`
	Ino   uint64 `json:"ino"`
	Ctime int64  `json:"ctime_ns"`
}

func ctimeNs(st *unix.Stat_t) int64 { return int64(st.Ctim.Sec)*1e9 + int64(st.Ctim.Nsec) }

// journalDir is where the journals of the runs of the user whose cache is
// cache are kept; "" (no journal) without a cache. It is not the "runs"
// directory of older versions: their sweep removes every journal of a dead
// run after removing its placeholders, so it would drop what a run of
// this version has yet to quarantine.
func journalDir(cache string) string {
	if cache == "" {
		return ""
	}
	return filepath.Join(cache, "journals")
}

// legacyJournalDir is where older versions recorded their placeholders;
// each run sweeps those of ended runs.
func legacyJournalDir(cache string) string { return filepath.Join(cache, "runs") }

// writeJournal records run runID's start state and returns the journal's
// path.
func writeJournal(dir, runID string, writable []string, pr State) (string, error) {
	var me self
	j, err := newJournal(runID, &me, writable, pr)
	if err != nil {
		return "", err
	}
	// The directory is sandbox-run's own: made without following links,
	// set aside and made again when another uid owns it or others may
	// write it (a forged journal would name files for the sweep to move).
	d, err := pathguard.OpenPrivateDir(dir)
	if err != nil {
		return "", err
	}
	defer d.Close()
	return writeJournalIn(d, dir, j)
}

// writeJournalIn is writeJournal into d, the journal directory dir
// already open (under its lock).
func writeJournalIn(d *pathguard.Dir, dir string, j journal) (string, error) {
	return filepath.Join(dir, j.RunID+".json"), saveJournal(d, j.RunID+".json", &j)
}

// writeHeldJournal writes j into d (the journal directory dir, under its
// lock, so that no run judges it before it is held) and holds it
// (holdJournal); a journal that could not be held is written again
// without claiming the lock. It returns the journal's path and the
// lock's release.
func writeHeldJournal(d *pathguard.Dir, dir string, j journal) (string, func(), error) {
	j.Locked = true
	p, err := writeJournalIn(d, dir, j)
	if err != nil {
		return "", nil, err
	}
	release, ok := holdJournal(d, j.RunID+".json")
	if !ok {
		j.Locked = false
		p, err = writeJournalIn(d, dir, j)
	}
	return p, release, err
}

// newJournal is run runID's start state, as its journal records it; me
// is this process, read once per run.
func newJournal(runID string, me *self, writable []string, pr State) (journal, error) {
	id, boot, err := me.get()
	if err != nil {
		return journal{}, err
	}
	return journal{PID: id.PID, Start: id.Start, NS: id.NS, BootID: boot, RunID: runID,
		Writable: writable, Watched: pr.Watched, Gits: pr.Gits, Held: pr.Held, SnapshotDir: pr.SnapDir}, nil
}

// saveJournal writes j whole to name in d (a new file, then renamed): a
// sweep never reads half a journal.
func saveJournal(d *pathguard.Dir, name string, j *journal) error {
	b, err := json.Marshal(j)
	if err != nil {
		return err
	}
	return d.WriteFile(name, b)
}

// lockJournals takes the journal directory's lock: starting a run (sweep,
// plan, journal) and ending one (settle) exclude each other, so that a run
// never starts on a path another run is quarantining. The wait is bounded.
//
// It returns the directory open, for the caller to settle and write in
// under the lock without opening it again; unlock closes it too.
func lockJournals(dir string) (*pathguard.Dir, func(), error) {
	d, err := pathguard.OpenPrivateDir(dir)
	if err != nil {
		return nil, nil, err
	}
	fd, err := unix.Openat(d.Fd(), ".lock", unix.O_RDWR|unix.O_CREAT|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0o600)
	if err != nil {
		d.Close()
		return nil, nil, err
	}
	deadline := time.Now().Add(lockWait)
	for {
		err = unix.Flock(fd, unix.LOCK_EX|unix.LOCK_NB)
		if err == nil {
			return d, func() { unix.Flock(fd, unix.LOCK_UN); unix.Close(fd); d.Close() }, nil
		}
		if !errors.Is(err, unix.EWOULDBLOCK) || time.Now().After(deadline) {
			unix.Close(fd)
			d.Close()
			if err == nil || errors.Is(err, unix.EWOULDBLOCK) {
				err = fmt.Errorf("another run held %s for %s", filepath.Join(dir, ".lock"), lockWait)
			}
			return nil, nil, err
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// lockWait bounds the wait for the journal lock; a holder's work is
// bounded by the walk's bounds.
const lockWait = 30 * time.Second

// settleJournals handles the journals of runs that are over (own, the caller's
// own journal, counts as over): a journal whose writable directories no
// live run shares is neutralised into q and removed; one that still shares
// them waits, marked ended. The caller holds the lock.
//
// Only journals this user wrote are read: a directory or a journal that
// another uid owns, or that others may write, is ignored (pathguard.Dir).
// A missing directory (the legacy one, usually) is not made.
func settleJournals(dir, own string, q *quarantine) {
	if _, err := os.Lstat(dir); errors.Is(err, fs.ErrNotExist) {
		return
	}
	d, err := pathguard.OpenPrivateDir(dir)
	if err != nil {
		return
	}
	defer d.Close()
	settleIn(d, dir, own, new(self), q)
}

// settleIn is settleJournals in d, the directory dir already open (under
// its lock); me is this process, read (once per run) only when d holds a
// journal.
func settleIn(d *pathguard.Dir, dir, own string, me *self, q *quarantine) {
	live, over, paths := readJournals(d, dir, own, me)
	walks := map[string]*hostwalk.GitFinds{}
	var settle []*journal
	for _, j := range over {
		if overlaps(j, live) {
			if !j.Ended {
				j.Ended = true
				saveJournal(d, paths[j], j)
			}
			continue
		}
		settle = append(settle, j)
	}
	q.earliest = earliestCopies(settle)
	for _, j := range settle {
		sweepPlaceholders(j.Placeholders)
		key := strings.Join(j.Writable, "\x00")
		if walks[key] == nil {
			walks[key] = q.walk(j.Writable)
		}
		q.neutralise(j, walks[key])
		d.Remove(paths[j])
	}
}

// readJournals reads the journals in d (the directory dir) and sorts
// them: live, the runs that still run; over, those that are over (own,
// ended, of an earlier boot, or whose process ended). See judgeJournal.
func readJournals(d *pathguard.Dir, dir, own string, me *self) (live, over []*journal, paths map[*journal]string) {
	paths = map[*journal]string{}
	names, err := d.Names()
	if err != nil {
		return nil, nil, paths
	}
	for _, name := range names {
		if !strings.HasSuffix(name, ".json") {
			continue
		}
		_, boot, err := me.get()
		if err != nil {
			return nil, nil, paths
		}
		b, err := d.ReadFile(name)
		if err != nil {
			continue
		}
		j := new(journal)
		if json.Unmarshal(b, j) != nil {
			continue
		}
		paths[j] = name
		if filepath.Join(dir, name) == own || j.Ended || j.BootID != boot || judgeJournal(d, name, j, me) == procid.Ended {
			over = append(over, j)
		} else {
			live = append(live, j)
		}
	}
	return live, over, paths
}

// judgeJournal tells whether the run of journal j (the file name in d)
// still runs. Its pid is judged when this process can (procid.Judge: the
// run's pid namespace is this one's). A run in another pid namespace
// (procid.Unknown) is judged by the flock it holds on its journal while
// it runs (Locked): a lock this process can take exclusively has no
// holder left, so the run ended.
//
// When neither can tell (a journal of another namespace without the lock,
// as where the cache's file system has no flock, or the probe failing),
// the run counts as live: its journal is not settled and it holds back
// the ended runs that share its directories, until a run that can judge
// it (itself as it ends, one in its namespace) or the next boot does.
// That is the safe side: settling under a live run would rename what it
// holds (detaching its mounts) and drop its journal, so that what it
// creates after is never neutralised; waiting only defers neutralising.
func judgeJournal(d *pathguard.Dir, name string, j *journal, me *self) procid.State {
	st := me.judge().State(procid.ID{PID: j.PID, Start: j.Start, NS: j.NS})
	if st != procid.Unknown || !j.Locked {
		return st
	}
	return procid.ProbeAt(d.Fd(), name)
}

// holdJournal takes the shared flock that marks the run of journal name
// in d live (see judgeJournal) and returns its release, which the run
// calls once it has settled; the kernel releases it when the process
// ends, however (procid.HoldAt). ok is false when the lock could not be
// taken: the journal must then not claim it (Locked), or a run of another
// namespace would take it free and judge the run ended.
func holdJournal(d *pathguard.Dir, name string) (release func(), ok bool) {
	return procid.HoldAt(d.Fd(), name)
}

// overlaps says whether a live run shares a writable directory (or one
// inside another) with j.
func overlaps(j *journal, live []*journal) bool {
	for _, l := range live {
		for _, a := range j.Writable {
			for _, b := range l.Writable {
				if policy.Within(a, b) || policy.Within(b, a) {
					return true
				}
			}
		}
	}
	return false
}

// sweepPlaceholders removes an older version's placeholders while they
// are the empty inodes it made, deepest first.
func sweepPlaceholders(phs []placeholder) {
	// Identities first: removing a child changes its parent's ctime.
	var same []placeholder
	for _, ph := range phs {
		if unchanged(ph) {
			same = append(same, ph)
		}
	}
	for i := len(same) - 1; i >= 0; i-- {
		removeEmpty(same[i].Path)
	}
}

// unchanged says whether the inode at p.Path is the one the run made,
// unchanged since.
func unchanged(p placeholder) bool {
	var st unix.Stat_t
	return unix.Lstat(p.Path, &st) == nil && st.Dev == p.Dev && st.Ino == p.Ino && ctimeNs(&st) == p.Ctime
}

// removeEmpty removes an empty file or directory at p; rmdir refuses a
// directory that is not empty.
func removeEmpty(p string) {
	var st unix.Stat_t
	if unix.Lstat(p, &st) != nil {
		return
	}
	switch st.Mode & unix.S_IFMT {
	case unix.S_IFREG:
		if st.Size == 0 {
			unix.Unlink(p)
		}
	case unix.S_IFDIR:
		unix.Rmdir(p)
	}
}

// self is this process as journals name it (procid.Self: its pid, start
// time and namespace token, and the boot's id) and as it judges other
// runs (procid.NewJudge), each read once, when first asked for. The zero
// value is ready to use; a run keeps one for its journal and its settles.
type self struct {
	read   bool
	id     procid.ID
	boot   string
	err    error
	judged bool
	j      procid.Judge
}

// get returns this process's ID and the boot's id, reading them the first
// time; an error is kept and returned again.
func (s *self) get() (procid.ID, string, error) {
	if !s.read {
		s.id, s.boot, s.err = procid.Self()
		s.read = true
	}
	return s.id, s.boot, s.err
}

// judge returns this process's procid.Judge, read the first time.
func (s *self) judge() procid.Judge {
	if !s.judged {
		s.j, s.judged = procid.NewJudge(), true
	}
	return s.j
}
