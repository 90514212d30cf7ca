package sandbox

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/sandbox-run/sandbox-run/pathguard"
)

// A journal records the placeholders a run created in the user's tree
// (empty files and directories that hold missing protected paths), so that
// when the run is killed before its own cleanup (SIGKILL, a crash), the
// next run of the same user removes them: an empty .mcp.json, or a .git
// directory holding only hooks/, would change what later tools do there.
//
// A placeholder is removed only while it is what the run made: the same
// inode, and still empty. Anything the command or the user put there
// stays.
type journal struct {
	PID          int           `json:"pid"`
	Start        uint64        `json:"start"`   // the process's start time, in clock ticks after boot
	BootID       string        `json:"boot_id"` // a journal of an earlier boot is stale whatever its pid
	Placeholders []placeholder `json:"placeholders"`
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
// cache are kept; "" (no journal) without a cache.
func journalDir(cache string) string {
	if cache == "" {
		return ""
	}
	return filepath.Join(cache, "runs")
}

// writeJournal records the placeholders of run runID and returns the
// journal's path, which the run removes once it has removed them itself.
func writeJournal(dir, runID string, paths []string) (string, error) {
	start, boot, err := selfStart()
	if err != nil {
		return "", err
	}
	j := journal{PID: os.Getpid(), Start: start, BootID: boot}
	for _, p := range paths {
		var st unix.Stat_t
		if err := unix.Lstat(p, &st); err != nil {
			return "", err
		}
		j.Placeholders = append(j.Placeholders, placeholder{Path: p, Dev: st.Dev, Ino: st.Ino, Ctime: ctimeNs(&st)})
	}
	b, err := json.Marshal(j)
	if err != nil {
		return "", err
	}
	// The directory is sandbox-run's own: made without following links,
	// set aside and made again when another uid owns it or others may
	// write it (a forged journal would name files for the sweep to remove).
	d, err := pathguard.OpenPrivateDir(dir)
	if err != nil {
		return "", err
	}
	defer d.Close()
	// Written whole, then renamed: a sweep never reads half a journal.
	if err := d.WriteFile(runID+".json", b); err != nil {
		return "", err
	}
	return filepath.Join(dir, runID+".json"), nil
}

// removeJournal removes the journal at path, written by writeJournal,
// through its directory pinned without following links.
func removeJournal(path string) {
	d, err := pathguard.OpenPrivateDir(filepath.Dir(path))
	if err != nil {
		return
	}
	d.Remove(filepath.Base(path))
	d.Close()
}

// sweepJournals removes what runs that are gone left behind: the
// placeholders of every journal whose process no longer runs (or runs
// since another boot), deepest first, then the journal.
//
// Only journals this user wrote are read: a directory or a journal that
// another uid owns, or that others may write, is ignored (pathguard.Dir).
func sweepJournals(dir string) {
	d, err := pathguard.OpenPrivateDir(dir)
	if err != nil {
		return
	}
	defer d.Close()
	names, err := d.Names()
	if err != nil {
		return
	}
	_, boot, err := selfStart()
	if err != nil {
		return
	}
	for _, name := range names {
		if !strings.HasSuffix(name, ".json") {
			continue
		}
		b, err := d.ReadFile(name)
		if err != nil {
			continue
		}
		var j journal
		if json.Unmarshal(b, &j) != nil {
			continue
		}
		if j.BootID == boot && alive(j.PID, j.Start) {
			continue
		}
		// Identities first: removing a child changes its parent's ctime.
		var same []placeholder
		for _, ph := range j.Placeholders {
			if unchanged(ph) {
				same = append(same, ph)
			}
		}
		for i := len(same) - 1; i >= 0; i-- {
			removeEmpty(same[i].Path)
		}
		d.Remove(name)
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

// alive says whether pid runs and started at start: a pid reused by
// another process does not count.
func alive(pid int, start uint64) bool {
	s, err := procStart(pid)
	return err == nil && s == start
}

// selfStart returns this process's start time and the boot's id.
func selfStart() (uint64, string, error) {
	start, err := procStart(os.Getpid())
	if err != nil {
		return 0, "", err
	}
	b, err := os.ReadFile("/proc/sys/kernel/random/boot_id")
	if err != nil {
		return 0, "", err
	}
	return start, string(bytes.TrimSpace(b)), nil
}

// procStart reads field 22 of /proc/PID/stat, the start time. The command
// name (field 2) may hold spaces and parentheses, so fields are counted
// after its last ')'.
func procStart(pid int) (uint64, error) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0, err
	}
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return 0, errors.New("sandbox: malformed /proc stat")
	}
	f := strings.Fields(string(b[i+1:]))
	// After the name: state is field 3, so start time (22) is f[19].
	if len(f) < 20 {
		return 0, fmt.Errorf("sandbox: /proc/%d/stat: %w", pid, fs.ErrInvalid)
	}
	return strconv.ParseUint(f[19], 10, 64)
}
