package hostwalk

import "golang.org/x/sys/unix"

// Kind is what a path is, as far as a protection layout needs to know:
// missing, or a directory, a link or anything else (a file), links never
// followed.
type Kind int

// The Kinds of a path. KindFile is everything that is neither a
// directory nor a link (a regular file, a socket, a FIFO, a device).
const (
	KindMissing Kind = iota
	KindDir
	KindFile
	KindLink
)

// LstatKind says what is at p, without following a link at p: one lstat,
// a snapshot (what is there a moment later may differ). A path that
// cannot be lstat'ed for any reason (absent, unsearchable parent) is
// KindMissing.
func LstatKind(p string) Kind {
	var st unix.Stat_t
	if err := unix.Lstat(p, &st); err != nil {
		return KindMissing
	}
	switch st.Mode & unix.S_IFMT {
	case unix.S_IFDIR:
		return KindDir
	case unix.S_IFLNK:
		return KindLink
	}
	return KindFile
}

// Default bounds of FindGit's walk: entries listed in all and levels
// below a starting directory. Both are counts, not a clock, so that the
// same tree gives the same answer on a loaded machine.
const (
	MaxEntries = 200_000
	MaxDepth   = 64
)

// Bounds bounds one FindGit walk; a zero field is its default
// (MaxEntries, MaxDepth). Tests set small ones instead of making 200,000
// files.
type Bounds struct {
	Entries, Depth int
}

// OrDefault is b with each zero field set to its default.
func (b Bounds) OrDefault() Bounds {
	if b.Entries <= 0 {
		b.Entries = MaxEntries
	}
	if b.Depth <= 0 {
		b.Depth = MaxDepth
	}
	return b
}
