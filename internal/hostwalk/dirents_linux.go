package hostwalk

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io/fs"

	"golang.org/x/sys/unix"
)

// Dirent is a directory entry's name and file type bits (as getdents
// gave them, or lstat when it gave none; a link is a link, never its
// target).
type Dirent struct {
	Name string
	Mode fs.FileMode
}

// Dirents is a directory's listing, in the order getdents gave it.
type Dirents []Dirent

// Get finds name in the listing (a linear scan: a git directory's names are
// looked up only in directories the walk already lists).
func (d Dirents) Get(name string) (fs.FileMode, bool) {
	for _, e := range d {
		if e.Name == name {
			return e.Mode, true
		}
	}
	return 0, false
}

// Lister lists directories with getdents64 straight into one reused
// buffer. The walks of the writable dirs list every directory of the
// workdir twice per run (before and after the command), so the listing is
// on every run's path: os.File.ReadDir allocates an entry and a name per
// file, this allocates one string per directory for all of its names, and
// reuses the listing itself. The zero value is ready to use; a Lister is
// not safe for concurrent use.
type Lister struct {
	buf   []byte
	names []byte
	ents  []rawEnt
	out   Dirents
}

// rawEnt is an entry's name as a span of Lister.names, and its type.
type rawEnt struct {
	off, n int
	mode   fs.FileMode
}

// errBadDirent is a getdents record that does not fit its buffer: a
// kernel bug, never a file name.
var errBadDirent = errors.New("malformed getdents64 record")

// List reads every entry of the directory open at fd (which it neither
// seeks nor closes) but "." and "..", each with the type getdents gave.
// An entry of unknown type (DT_UNKNOWN, on file systems that do not
// store it) is lstat'ed through fd, never followed; one that is gone by
// then is left out. bound, when positive, stops the listing with
// errTooMany once more entries than that were read, before the rest of a
// huge directory is.
//
// The listing returned is l's own and holds until l's next list: that
// call reuses it, since a new process's every fresh heap page costs a
// page fault and the walks list tens of thousands of entries. The names
// in it are strings and stay valid; a caller that lists again before it
// is done with the entries (a depth-first walk) copies what it needs.
func (l *Lister) List(fd, bound int) (Dirents, error) {
	if l.buf == nil {
		l.buf = make([]byte, 32<<10)
	}
	l.names, l.ents = l.names[:0], l.ents[:0]
	for {
		n, err := unix.Getdents(fd, l.buf)
		if errors.Is(err, unix.EINTR) {
			continue
		}
		if err != nil {
			return nil, err
		}
		if n == 0 {
			break
		}
		if err := l.parse(fd, l.buf[:n]); err != nil {
			return nil, err
		}
		if bound > 0 && len(l.ents) > bound {
			return nil, errTooMany
		}
	}
	all := string(l.names)
	l.out = l.out[:0]
	for _, e := range l.ents {
		l.out = append(l.out, Dirent{Name: all[e.off : e.off+e.n], Mode: e.mode})
	}
	return l.out, nil
}

// errTooMany: a listing passed its bound.
var errTooMany = errors.New("too many entries")

// parse appends the entries of one getdents64 buffer: struct
// linux_dirent64 { u64 ino; s64 off; u16 reclen; u8 type; char name[]; }.
func (l *Lister) parse(fd int, b []byte) error {
	const nameOff = 19
	for len(b) > 0 {
		if len(b) < nameOff {
			return errBadDirent
		}
		reclen := int(binary.NativeEndian.Uint16(b[16:18]))
		if reclen < nameOff || reclen > len(b) {
			return errBadDirent
		}
		typ, name := b[18], b[nameOff:reclen]
		b = b[reclen:]
		for i, c := range name {
			if c == 0 {
				name = name[:i]
				break
			}
		}
		if len(name) == 0 || string(name) == "." || string(name) == ".." {
			continue
		}
		mode, ok := direntMode(typ)
		if !ok {
			var st unix.Stat_t
			err := unix.Fstatat(fd, string(name), &st, unix.AT_SYMLINK_NOFOLLOW)
			if errors.Is(err, unix.ENOENT) {
				continue
			}
			if err != nil {
				return fmt.Errorf("lstat %q: %w", name, err)
			}
			mode = statMode(st.Mode)
		}
		l.ents = append(l.ents, rawEnt{off: len(l.names), n: len(name), mode: mode})
		l.names = append(l.names, name...)
	}
	return nil
}

// direntMode maps a getdents type to the file type bits of fs.FileMode;
// ok is false for DT_UNKNOWN.
func direntMode(typ byte) (fs.FileMode, bool) {
	switch typ {
	case unix.DT_REG:
		return 0, true
	case unix.DT_DIR:
		return fs.ModeDir, true
	case unix.DT_LNK:
		return fs.ModeSymlink, true
	case unix.DT_SOCK:
		return fs.ModeSocket, true
	case unix.DT_FIFO:
		return fs.ModeNamedPipe, true
	case unix.DT_CHR:
		return fs.ModeDevice | fs.ModeCharDevice, true
	case unix.DT_BLK:
		return fs.ModeDevice, true
	}
	return 0, false
}

// statMode maps st_mode's file type to fs.FileMode's type bits.
func statMode(m uint32) fs.FileMode {
	switch m & unix.S_IFMT {
	case unix.S_IFDIR:
		return fs.ModeDir
	case unix.S_IFLNK:
		return fs.ModeSymlink
	case unix.S_IFSOCK:
		return fs.ModeSocket
	case unix.S_IFIFO:
		return fs.ModeNamedPipe
	case unix.S_IFCHR:
		return fs.ModeDevice | fs.ModeCharDevice
	case unix.S_IFBLK:
		return fs.ModeDevice
	case unix.S_IFREG:
		return 0
	}
	return fs.ModeIrregular
}
