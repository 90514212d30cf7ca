package protect

import (
	"errors"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/sandbox-run/sandbox-run/internal/procid"
	"github.com/sandbox-run/sandbox-run/pathguard"
)

// legacyPlaceholder makes an empty file or directory as older versions
// did to hold a missing protected path.
func legacyPlaceholder(t *testing.T, p string, dir bool) placeholder {
	t.Helper()
	var err error
	if dir {
		err = os.Mkdir(p, 0o755)
	} else {
		err = os.WriteFile(p, nil, 0o644)
	}
	if err != nil {
		t.Fatal(err)
	}
	return identity(t, p)
}

func identity(t *testing.T, p string) placeholder {
	var st unix.Stat_t
	if err := unix.Lstat(p, &st); err != nil {
		t.Fatal(err)
	}
	return placeholder{Path: p, Dev: st.Dev, Ino: st.Ino, Ctime: ctimeNs(&st)}
}

// goneJournal writes a journal of a run that is gone: this process's pid
// with another start time, as a reused pid looks.
func goneJournal(t *testing.T, dir, id string, j journal) {
	t.Helper()
	me, boot, err := procid.Self()
	if err != nil {
		t.Fatal(err)
	}
	j.PID, j.Start, j.NS, j.BootID, j.RunID = me.PID, me.Start+1, me.NS, boot, id
	d, err := pathguard.OpenPrivateDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	if err := saveJournal(d, id+".json", &j); err != nil {
		t.Fatal(err)
	}
}

// TestSweepLegacyPlaceholders: an older version's placeholders are removed
// while they are still the empty inodes it made; anything with content or
// replaced since stays.
func TestSweepLegacyPlaceholders(t *testing.T) {
	w, dir := t.TempDir(), t.TempDir()
	legacyPlaceholder(t, filepath.Join(w, ".git"), true)
	hooks := legacyPlaceholder(t, filepath.Join(w, ".git/hooks"), true)
	gitDir := identity(t, filepath.Join(w, ".git")) // after its child, as the old runs did
	mcp := legacyPlaceholder(t, filepath.Join(w, ".mcp.json"), false)
	written := legacyPlaceholder(t, filepath.Join(w, ".bashrc"), false)
	replaced := legacyPlaceholder(t, filepath.Join(w, ".profile"), false)
	goneJournal(t, dir, "gone", journal{Writable: []string{w}, Placeholders: []placeholder{gitDir, hooks, mcp, written, replaced}})
	os.WriteFile(written.Path, []byte("mine"), 0o644)
	os.Remove(replaced.Path)
	os.WriteFile(replaced.Path, nil, 0o644) // empty, but not the inode the run made

	q := &quarantine{dir: filepath.Join(t.TempDir(), "q")}
	settleJournals(dir, "", q)

	for p, want := range map[string]bool{gitDir.Path: false, hooks.Path: false, mcp.Path: false, written.Path: true, replaced.Path: true} {
		if _, err := os.Lstat(p); (err == nil) != want {
			t.Errorf("%s: exists %v, want %v", filepath.Base(p), err == nil, want)
		}
	}
	if _, err := os.Stat(filepath.Join(dir, "gone.json")); err == nil {
		t.Error("the swept journal is still there")
	}
}

// TestSettleWaitsForLiveRuns: an ended run's watched paths are quarantined
// only once no live run shares its writable directory; a run on another
// directory does not hold it back.
func TestSettleWaitsForLiveRuns(t *testing.T) {
	w, other, dir := t.TempDir(), t.TempDir(), t.TempDir()
	mcp := filepath.Join(w, ".mcp.json")
	goneJournal(t, dir, "ended", journal{Writable: []string{w}, Watched: []string{mcp}})
	os.WriteFile(mcp, []byte(`{"mcpServers":{}}`), 0o644)

	// A live run on another directory: no reason to wait.
	// A live run on the same one: the ended run's journal waits.
	live, err := writeJournal(dir, "live", []string{w}, State{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := writeJournal(dir, "elsewhere", []string{other}, State{}); err != nil {
		t.Fatal(err)
	}
	q := &quarantine{dir: filepath.Join(t.TempDir(), "q")}
	settleJournals(dir, "", q)
	if _, err := os.Stat(mcp); err != nil || len(q.items) != 0 {
		t.Fatalf("quarantined while a run on %s was live: %v %v", w, err, q.items)
	}
	b, _ := os.ReadFile(filepath.Join(dir, "ended.json"))
	if !strings.Contains(string(b), `"ended":true`) {
		t.Errorf("the waiting journal is not marked ended: %s", b)
	}
	// The live run ends (settles with its own journal as self): now the
	// ended run's path goes, and both journals with it.
	settleJournals(dir, live, q)
	if _, err := os.Lstat(mcp); err == nil {
		t.Fatalf("%s still in the tree after the last run", mcp)
	}
	if len(q.items) != 1 || q.items[0].Path != mcp || q.items[0].Run != "ended" {
		t.Fatalf("quarantined %+v", q.items)
	}
	if b, err := os.ReadFile(q.items[0].To); err != nil || !strings.Contains(string(b), "mcpServers") {
		t.Errorf("quarantine %s: %q %v", q.items[0].To, b, err)
	}
	for _, id := range []string{"ended", "live"} {
		if _, err := os.Stat(filepath.Join(dir, id+".json")); err == nil {
			t.Errorf("journal %s left", id)
		}
	}
	if _, err := os.Stat(filepath.Join(dir, "elsewhere.json")); err != nil {
		t.Errorf("a live run's journal was removed: %v", err)
	}
}

// TestSweepIgnoresUntrustedJournals: a journal others could have written
// (it or its directory writable by group or others) is never read, so a
// forged one cannot make the settling quarantine a file. The control: the
// same journal, trusted, does move it.
func TestSweepIgnoresUntrustedJournals(t *testing.T) {
	for _, tt := range []struct {
		name  string
		forge func(dir, journal string) error
	}{
		{"journal writable by others", func(_, j string) error { return os.Chmod(j, 0o666) }},
		{"dir writable by others", func(d, _ string) error { return os.Chmod(d, 0o777) }},
	} {
		t.Run(tt.name, func(t *testing.T) {
			w, dir := t.TempDir(), filepath.Join(t.TempDir(), "journals")
			victim := filepath.Join(w, "file-of-the-user")
			if err := os.WriteFile(victim, []byte("mine"), 0o644); err != nil {
				t.Fatal(err)
			}
			forged := func() string {
				goneJournal(t, dir, "forged", journal{Writable: []string{w}, Watched: []string{victim}})
				return filepath.Join(dir, "forged.json")
			}
			path := forged()
			if err := tt.forge(dir, path); err != nil {
				t.Fatal(err)
			}
			q := &quarantine{dir: filepath.Join(t.TempDir(), "q")}
			settleJournals(dir, "", q)
			if _, err := os.Lstat(victim); err != nil || len(q.items) != 0 {
				t.Fatalf("an untrusted journal was obeyed: %v %+v", err, q.items)
			}
			// Control: trusted, the same journal moves the file.
			forged()
			settleJournals(dir, "", q)
			if _, err := os.Lstat(victim); err == nil || len(q.items) != 1 {
				t.Fatalf("control: a trusted journal did not quarantine %s (untested): %+v", victim, q.items)
			}
		})
	}
}

// TestSettleOtherNamespace: the journal of a run in another pid namespace
// (whose pid this process cannot judge: it names another process here)
// is judged by the lock its run holds on it. Held, the run is live: its
// journal stays and it holds back an ended run on the same directory.
// Released, the run ended: both are settled. A journal of another
// namespace that claims no lock cannot be judged, and counts as live
// until its boot has passed. The control: the same journal in this
// namespace (this process's pid and start time) is judged by its pid.
// With the judgement by pid alone (the code before namespaces), the held
// case is settled under its live run.
func TestSettleOtherNamespace(t *testing.T) {
	me, boot, err := procid.Self()
	if err != nil {
		t.Fatal(err)
	}
	w, dir := t.TempDir(), t.TempDir()
	mcp, theirs := filepath.Join(w, ".mcp.json"), filepath.Join(w, ".envrc")
	both := "ended:.mcp.json foreign:.envrc"
	for _, tc := range []struct {
		name         string
		ns, boot     string
		locked, hold bool
		want         string // the runs and names quarantined, sorted
	}{
		{"control, this namespace", me.NS, boot, false, false, ""},
		{"held", "1", boot, true, true, ""}, // no pid namespace has inode 1
		{"released", "1", boot, true, false, both},
		{"no lock claimed", "1", boot, false, false, ""},
		{"an earlier boot", "1", "an earlier boot", false, false, both},
	} {
		t.Run(tc.name, func(t *testing.T) {
			// In another namespace its pid names another process here,
			// as a sandbox's pid 2 does on the host: judged by pid, it
			// would have ended.
			start := me.Start
			if tc.ns != me.NS {
				start++
			}
			j := journal{PID: me.PID, Start: start, NS: tc.ns, BootID: tc.boot, Locked: tc.locked,
				RunID: "foreign", Writable: []string{w}, Watched: []string{theirs}}
			d, err := pathguard.OpenPrivateDir(dir)
			if err != nil {
				t.Fatal(err)
			}
			defer d.Close()
			if err := saveJournal(d, "foreign.json", &j); err != nil {
				t.Fatal(err)
			}
			if tc.hold {
				release, ok := holdJournal(d, "foreign.json")
				if !ok {
					t.Fatal("cannot hold the journal")
				}
				defer release()
			}
			goneJournal(t, dir, "ended", journal{Writable: []string{w}, Watched: []string{mcp}})
			os.WriteFile(mcp, []byte("{}"), 0o644)
			os.WriteFile(theirs, []byte("theirs"), 0o644)

			q := &quarantine{dir: filepath.Join(t.TempDir(), "q")}
			settleJournals(dir, "", q)
			var got []string
			for _, it := range q.items {
				got = append(got, it.Run+":"+filepath.Base(it.Path))
			}
			sort.Strings(got)
			if strings.Join(got, " ") != tc.want {
				t.Errorf("quarantined %q, want %q", got, tc.want)
			}
			_, err = os.Stat(filepath.Join(dir, "foreign.json"))
			if kept := tc.want == ""; kept != (err == nil) {
				t.Errorf("the foreign journal kept: %v, want %v", err == nil, kept)
			}
		})
	}
}

// TestJournalHeldWhileRunning: a run's journal claims the lock (Locked)
// and its run holds it from Start to Finish, so that a run in another pid
// namespace judges it live (an exclusive lock is refused); Finish settles
// the journal away. The control: the same probe on a journal nobody holds
// takes the lock.
func TestJournalHeldWhileRunning(t *testing.T) {
	cache, w := t.TempDir(), t.TempDir()
	pend, err := Start(cache, "held", false, nil, Hooks{NoGuard: true}, func() ([]string, State, func(), error) {
		return []string{w}, State{}, func() {}, nil
	})
	if err != nil {
		t.Fatal(err)
	}
	probe := func(p string) error {
		fd, err := unix.Open(p, unix.O_RDONLY|unix.O_CLOEXEC, 0)
		if err != nil {
			return err
		}
		defer unix.Close(fd)
		return unix.Flock(fd, unix.LOCK_EX|unix.LOCK_NB)
	}
	b, _ := os.ReadFile(pend.jpath)
	if !strings.Contains(string(b), `"locked":true`) {
		t.Errorf("the journal does not claim its lock: %s", b)
	}
	if err := probe(pend.jpath); !errors.Is(err, unix.EWOULDBLOCK) {
		t.Errorf("probing a running run's journal: %v, want EWOULDBLOCK", err)
	}
	free := filepath.Join(t.TempDir(), "free.json")
	os.WriteFile(free, b, 0o600)
	if err := probe(free); err != nil {
		t.Errorf("control: probing a journal nobody holds: %v", err)
	}
	pend.Finish(nil, nil, nil)
	if _, err := os.Stat(pend.jpath); err == nil {
		t.Errorf("the run's journal %s is left after Finish", pend.jpath)
	}
}
