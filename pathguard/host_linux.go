package pathguard

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"
)

// maxStateFile bounds what [Dir.ReadFile] reads: sandbox-run's own state
// files are a few KiB (bwrap's --help, a journal).
const maxStateFile = 4 << 20

// OpenFile opens the host file p (absolute and clean) with flag, as
// os.OpenFile does, but without following a symbolic link in any
// component: p's directory is pinned as an O_PATH descriptor opened with
// openat2 RESOLVE_NO_SYMLINKS (or the openat walk of [Resolution.Open]),
// and the file is opened relative to it with O_NOFOLLOW, O_NOCTTY and
// O_CLOEXEC. A p that exists and is not a regular file (a link, dangling
// or not, a FIFO, a device, a directory) is refused with an error wrapping
// [ErrNotRegular] without being opened for reading or writing (a FIFO
// could block, a device act); a link anywhere on the way gives an error
// wrapping ELOOP or ENOTDIR. With os.O_CREATE, a file that does not exist
// is made with perm (less the umask).
//
// OpenFile does not check p against a writable set; call [Guard.CheckHost]
// first where there is one.
//
// Without os.O_CREATE, a p that is there is opened in two calls instead of
// three (openExisting): the file itself pinned as O_PATH with openat2
// RESOLVE_NO_SYMLINKS, checked regular by fstat, then reopened through its
// descriptor. Any other outcome takes the way above, errors included.
func OpenFile(p string, flag int, perm os.FileMode) (*os.File, error) {
	if flag&os.O_CREATE == 0 {
		if f := openExisting(p, flag); f != nil {
			return f, nil
		}
	}
	dfd, name, err := openParent(p)
	if err != nil {
		return nil, err
	}
	defer unix.Close(dfd)
	var st unix.Stat_t
	if err := unix.Fstatat(dfd, name, &st, unix.AT_SYMLINK_NOFOLLOW); err == nil && st.Mode&unix.S_IFMT != unix.S_IFREG {
		return nil, notRegular(p, st.Mode)
	}
	// O_NONBLOCK: a FIFO swapped in after the fstatat must not block the
	// open; the fstat below refuses it.
	fd, err := unix.Openat(dfd, name, flag|unix.O_NOFOLLOW|unix.O_NOCTTY|unix.O_CLOEXEC|unix.O_NONBLOCK, uint32(perm.Perm()))
	if errors.Is(err, unix.ELOOP) {
		return nil, fmt.Errorf("pathguard: %s is a symbolic link: %w", p, ErrNotRegular)
	}
	if err != nil {
		return nil, &fs.PathError{Op: "open", Path: p, Err: err}
	}
	if err := unix.Fstat(fd, &st); err != nil || st.Mode&unix.S_IFMT != unix.S_IFREG {
		unix.Close(fd)
		if err != nil {
			return nil, &fs.PathError{Op: "fstat", Path: p, Err: err}
		}
		return nil, notRegular(p, st.Mode)
	}
	if err := unix.SetNonblock(fd, false); err != nil {
		unix.Close(fd)
		return nil, &fs.PathError{Op: "fcntl", Path: p, Err: err}
	}
	return os.NewFile(uintptr(fd), p), nil
}

// openExisting is OpenFile's way for a regular file p that is there: p is
// opened O_PATH (no read, no write: a FIFO or device is never opened for
// either) without following any link, fstat'ed, and when regular reopened
// with flag through /proc/self/fd, which reaches that very inode. nil when
// any step fails or p is not a regular file: the caller then takes the
// way that names the reason.
func openExisting(p string, flag int) *os.File {
	if checkPath(p) != nil {
		return nil
	}
	pfd, err := unix.Openat2(unix.AT_FDCWD, p, &unix.OpenHow{
		Flags:   uint64(pathFlags),
		Resolve: unix.RESOLVE_NO_SYMLINKS | unix.RESOLVE_NO_MAGICLINKS,
	})
	if err != nil {
		return nil
	}
	defer unix.Close(pfd)
	var pst, st unix.Stat_t
	if unix.Fstat(pfd, &pst) != nil || pst.Mode&unix.S_IFMT != unix.S_IFREG {
		return nil
	}
	fd, err := unix.Open("/proc/self/fd/"+strconv.Itoa(pfd), flag|unix.O_NOCTTY|unix.O_CLOEXEC|unix.O_NONBLOCK, 0)
	if err != nil {
		return nil
	}
	if unix.Fstat(fd, &st) != nil || st.Dev != pst.Dev || st.Ino != pst.Ino || unix.SetNonblock(fd, false) != nil {
		unix.Close(fd)
		return nil
	}
	return os.NewFile(uintptr(fd), p)
}

// WriteFile replaces the host file p with data: it writes a new file,
// created O_CREAT|O_EXCL with perm (less the umask) in p's directory, which
// is pinned as by [OpenFile], and renames it over p. Nothing is ever
// written through a link: a p that exists and is not a regular file is
// refused with an error wrapping [ErrNotRegular] and left as it is, and a
// link planted at p after that check is replaced, not followed. On error
// the new file is removed and p is unchanged.
func WriteFile(p string, data []byte, perm os.FileMode) error {
	dfd, name, err := openParent(p)
	if err != nil {
		return err
	}
	defer unix.Close(dfd)
	var st unix.Stat_t
	if err := unix.Fstatat(dfd, name, &st, unix.AT_SYMLINK_NOFOLLOW); err == nil && st.Mode&unix.S_IFMT != unix.S_IFREG {
		return notRegular(p, st.Mode)
	}
	return writeAt(dfd, p, name, data, perm)
}

// writeAt writes data to a new file in the directory dfd and renames it to
// name; p names the result in errors.
func writeAt(dfd int, p, name string, data []byte, perm os.FileMode) error {
	var rnd [8]byte
	if _, err := rand.Read(rnd[:]); err != nil {
		return err
	}
	tmp := "." + name + ".tmp-" + hex.EncodeToString(rnd[:])
	fd, err := unix.Openat(dfd, tmp, unix.O_WRONLY|unix.O_CREAT|unix.O_EXCL|unix.O_NOFOLLOW|unix.O_CLOEXEC, uint32(perm.Perm()))
	if err != nil {
		return &fs.PathError{Op: "create", Path: filepath.Join(filepath.Dir(p), tmp), Err: err}
	}
	f := os.NewFile(uintptr(fd), tmp)
	_, werr := f.Write(data)
	if cerr := f.Close(); werr == nil {
		werr = cerr
	}
	if werr == nil {
		if err := unix.Renameat(dfd, tmp, dfd, name); err != nil {
			werr = &fs.PathError{Op: "rename", Path: p, Err: err}
		}
	}
	if werr != nil {
		unix.Unlinkat(dfd, tmp, 0)
	}
	return werr
}

// RemoveIfSame removes the host file p if it is still the inode f has open
// and is empty: what a refused run leaves of an output file it created. p's
// directory is pinned as by [OpenFile]; nothing is followed.
func RemoveIfSame(p string, f *os.File) error {
	dfd, name, err := openParent(p)
	if err != nil {
		return err
	}
	defer unix.Close(dfd)
	var at, open unix.Stat_t
	if err := unix.Fstatat(dfd, name, &at, unix.AT_SYMLINK_NOFOLLOW); err != nil {
		return &fs.PathError{Op: "stat", Path: p, Err: err}
	}
	if err := unix.Fstat(int(f.Fd()), &open); err != nil {
		return &fs.PathError{Op: "fstat", Path: p, Err: err}
	}
	if at.Dev != open.Dev || at.Ino != open.Ino || at.Size != 0 {
		return fmt.Errorf("pathguard: remove %s: %w", p, ErrChanged)
	}
	if err := unix.Unlinkat(dfd, name, 0); err != nil {
		return &fs.PathError{Op: "remove", Path: p, Err: err}
	}
	return nil
}

// openParent pins the directory of p (absolute, clean, not "/") without
// following links and returns it with p's last component.
func openParent(p string) (int, string, error) {
	if err := checkPath(p); err != nil {
		return -1, "", err
	}
	if p == "/" {
		return -1, "", fmt.Errorf("pathguard: / is a directory: %w", ErrNotRegular)
	}
	dir, name := filepath.Dir(p), filepath.Base(p)
	dfd, err := openNoSymlinks(dir, unix.O_DIRECTORY)
	if errors.Is(err, unix.ELOOP) || errors.Is(err, unix.ENOTDIR) {
		return -1, "", fmt.Errorf("pathguard: %s: a component of %s is a symbolic link, which is not followed, or not a directory: %w", p, dir, err)
	}
	if err != nil {
		return -1, "", fmt.Errorf("pathguard: directory of %s: %w", p, err)
	}
	return dfd, name, nil
}

func notRegular(p string, mode uint32) error {
	kind := "not a regular file"
	switch mode & unix.S_IFMT {
	case unix.S_IFLNK:
		kind = "a symbolic link"
	case unix.S_IFDIR:
		kind = "a directory"
	case unix.S_IFIFO:
		kind = "a FIFO"
	case unix.S_IFSOCK:
		kind = "a socket"
	case unix.S_IFCHR, unix.S_IFBLK:
		kind = "a device"
	}
	return fmt.Errorf("pathguard: %s exists and is %s: %w", p, kind, ErrNotRegular)
}

// Dir is a private directory of sandbox-run's own state (its cache, its
// run journals), pinned by descriptor: every name in it is opened relative
// to that descriptor, never through a link. Close it when done.
type Dir struct {
	fd   int
	path string
}

// OpenPrivateDir opens the directory p (absolute and clean), making it and
// any missing parent (mode 0700) one component at a time, never following
// a symbolic link: a link among p's parents fails with an error wrapping
// ENOTDIR or ELOOP. The directory itself must be owned by the effective
// uid and not writable by group or others; one that is not (or that is a
// link, or not a directory) is untrusted: it is renamed aside to
// p.untrusted-PID-NANOS, its content unread, and p is made again, empty,
// provided p's parent is itself the effective uid's and closed to others;
// otherwise OpenPrivateDir fails with an error wrapping [ErrUntrusted] and
// leaves everything as it is.
//
// The common case, p there and trusted, costs one openat2 (RESOLVE_NO_SYMLINKS)
// instead of an open per component; every other case takes the walk.
func OpenPrivateDir(p string) (*Dir, error) {
	if err := checkPath(p); err != nil {
		return nil, err
	}
	if d := openTrusted(p); d != nil {
		return d, nil
	}
	cur, err := unix.Open("/", pathFlags|unix.O_DIRECTORY, 0)
	if err != nil {
		return nil, &fs.PathError{Op: "open", Path: "/", Err: err}
	}
	done := "/"
	comps := splitPath(p)
	for i, name := range comps {
		if i == len(comps)-1 {
			if err := trustOrRebuild(cur, p, name); err != nil {
				unix.Close(cur)
				return nil, err
			}
		}
		fd, err := openOrMkdir(cur, name)
		unix.Close(cur)
		done = join(done, name)
		if err != nil {
			return nil, fmt.Errorf("pathguard: private dir %s: %w", p, &fs.PathError{Op: "open", Path: done, Err: err})
		}
		cur = fd
	}
	d := &Dir{fd: cur, path: p}
	if err := d.trusted(-1, ""); err != nil {
		d.Close()
		return nil, err
	}
	return d, nil
}

// openTrusted opens p when it exists, is reached without a symbolic link
// anywhere (openat2's RESOLVE_NO_SYMLINKS: what the walk's O_NOFOLLOW on
// each component refuses) and is already trusted; nil otherwise: missing,
// a link on the way or at p, untrusted, or no openat2 (ENOSYS, EPERM
// under an old seccomp profile) are all left to OpenPrivateDir's walk,
// which makes, sets aside or refuses as it always did.
func openTrusted(p string) *Dir {
	fd, err := unix.Openat2(unix.AT_FDCWD, p, &unix.OpenHow{
		Flags:   uint64(pathFlags | unix.O_DIRECTORY),
		Resolve: unix.RESOLVE_NO_SYMLINKS | unix.RESOLVE_NO_MAGICLINKS,
	})
	if err != nil {
		return nil
	}
	d := &Dir{fd: fd, path: p}
	if d.trusted(-1, "") != nil {
		d.Close()
		return nil
	}
	return d
}

// splitPath returns the components of the absolute, clean path p.
func splitPath(p string) []string {
	if p == "/" {
		return nil
	}
	return strings.Split(p[1:], "/")
}

// openOrMkdir opens the directory name in dir, making it (0700) when it
// does not exist.
func openOrMkdir(dir int, name string) (int, error) {
	fd, err := unix.Openat(dir, name, pathFlags|unix.O_DIRECTORY, 0)
	if errors.Is(err, unix.ENOENT) {
		if err := unix.Mkdirat(dir, name, 0o700); err != nil && !errors.Is(err, unix.EEXIST) {
			return -1, err
		}
		fd, err = unix.Openat(dir, name, pathFlags|unix.O_DIRECTORY, 0)
	}
	return fd, err
}

// trustOrRebuild sets name in dir aside when it exists and is not a
// directory owned by the effective uid and closed to group and others.
func trustOrRebuild(dir int, p, name string) error {
	var st unix.Stat_t
	err := unix.Fstatat(dir, name, &st, unix.AT_SYMLINK_NOFOLLOW)
	if errors.Is(err, unix.ENOENT) {
		return nil
	}
	if err != nil {
		return &fs.PathError{Op: "stat", Path: p, Err: err}
	}
	if st.Mode&unix.S_IFMT == unix.S_IFDIR && untrustedWhy(&st) == "" {
		return nil
	}
	// Set aside only in a directory of our own: root must not take over a
	// user's cache (sudo keeping HOME), nor anyone rename in a directory
	// others share.
	var parent unix.Stat_t
	if err := unix.Fstat(dir, &parent); err != nil {
		return &fs.PathError{Op: "fstat", Path: filepath.Dir(p), Err: err}
	}
	if why := untrustedWhy(&parent); why != "" {
		return fmt.Errorf("pathguard: private dir %s is untrusted, and its directory (%s) is not this user's to rebuild it in: %w", p, why, ErrUntrusted)
	}
	aside := name + ".untrusted-" + strconv.Itoa(os.Getpid()) + "-" + strconv.FormatInt(time.Now().UnixNano(), 10)
	if err := unix.Renameat(dir, name, dir, aside); err != nil {
		return fmt.Errorf("pathguard: private dir %s is untrusted and cannot be set aside: %w", p, errors.Join(ErrUntrusted, err))
	}
	return nil
}

// untrustedWhy says why a file of sandbox-run's state cannot be trusted,
// "" when it can.
func untrustedWhy(st *unix.Stat_t) string {
	if int(st.Uid) != os.Geteuid() {
		return fmt.Sprintf("owned by uid %d, not %d", st.Uid, os.Geteuid())
	}
	if st.Mode&0o022 != 0 {
		return fmt.Sprintf("mode %#o is writable by group or others", st.Mode&0o7777)
	}
	return ""
}

// trusted checks the inode fd (the directory itself when fd is -1).
func (d *Dir) trusted(fd int, name string) error {
	if fd < 0 {
		fd = d.fd
	}
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return &fs.PathError{Op: "fstat", Path: filepath.Join(d.path, name), Err: err}
	}
	kind := uint32(unix.S_IFREG)
	if name == "" {
		kind = unix.S_IFDIR
	}
	why := untrustedWhy(&st)
	if why == "" && st.Mode&unix.S_IFMT != kind {
		why = "not of the expected kind"
	}
	if why != "" {
		return fmt.Errorf("pathguard: %s: %s: %w", filepath.Join(d.path, name), why, ErrUntrusted)
	}
	return nil
}

// Path is the directory's path as given to [OpenPrivateDir].
func (d *Dir) Path() string { return d.path }

// Close releases the directory's descriptor.
func (d *Dir) Close() error { return unix.Close(d.fd) }

// ReadFile reads the file name (one component) in d without following a
// link. A file that is not regular, not owned by the effective uid or
// writable by group or others gives an error wrapping [ErrUntrusted]: its
// content is not returned. At most 4 MiB is read.
func (d *Dir) ReadFile(name string) ([]byte, error) {
	fd, err := unix.Openat(d.fd, name, unix.O_RDONLY|unix.O_NOFOLLOW|unix.O_NOCTTY|unix.O_CLOEXEC|unix.O_NONBLOCK, 0)
	if errors.Is(err, unix.ELOOP) {
		return nil, fmt.Errorf("pathguard: %s is a symbolic link: %w", filepath.Join(d.path, name), ErrUntrusted)
	}
	if err != nil {
		return nil, &fs.PathError{Op: "open", Path: filepath.Join(d.path, name), Err: err}
	}
	f := os.NewFile(uintptr(fd), name)
	defer f.Close()
	if err := d.trusted(fd, name); err != nil {
		return nil, err
	}
	return io.ReadAll(io.LimitReader(f, maxStateFile))
}

// WriteFile replaces the file name in d with data, mode 0600: a new file
// created O_EXCL, then renamed over name.
func (d *Dir) WriteFile(name string, data []byte) error {
	return writeAt(d.fd, filepath.Join(d.path, name), name, data, 0o600)
}

// Remove removes the file name in d (a link is removed, not followed).
func (d *Dir) Remove(name string) error {
	if err := unix.Unlinkat(d.fd, name, 0); err != nil {
		return &fs.PathError{Op: "remove", Path: filepath.Join(d.path, name), Err: err}
	}
	return nil
}

// Names lists the names in d, unsorted.
func (d *Dir) Names() ([]string, error) {
	fd, err := unix.Openat(d.fd, ".", unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, &fs.PathError{Op: "open", Path: d.path, Err: err}
	}
	f := os.NewFile(uintptr(fd), d.path)
	defer f.Close()
	return f.Readdirnames(-1)
}

// Fd returns d's descriptor (O_PATH), valid until Close: the directory
// argument of the *at calls that must stay inside d, never to be closed by
// the caller.
func (d *Dir) Fd() int { return d.fd }

// ChildDir makes sure the directory name (one component) in d exists, is
// not a link, is mode 0700 and is owned by uid:gid, and returns its path.
// It is for state that another uid uses: as root, a sandbox's home or
// cache belongs to the sandbox's uid inside a directory of root's own. A
// name that exists as something else (a link, a file, a directory of
// another owner or open to others) is renamed aside to
// name.untrusted-PID-NANOS, unread, and made again, empty: d itself is
// this user's and closed to others, so nobody else can have put it there
// but a run of this user (for another uid).
func (d *Dir) ChildDir(name string, uid, gid int) (string, error) {
	p := filepath.Join(d.path, name)
	if name == "" || name == "." || name == ".." || strings.Contains(name, "/") {
		return "", fmt.Errorf("pathguard: %q is not one path component", name)
	}
	var st unix.Stat_t
	err := unix.Fstatat(d.fd, name, &st, unix.AT_SYMLINK_NOFOLLOW)
	switch {
	case err == nil && st.Mode&unix.S_IFMT == unix.S_IFDIR && int(st.Uid) == uid && st.Mode&0o077 == 0:
		return p, nil
	case err == nil:
		aside := name + ".untrusted-" + strconv.Itoa(os.Getpid()) + "-" + strconv.FormatInt(time.Now().UnixNano(), 10)
		if err := unix.Renameat(d.fd, name, d.fd, aside); err != nil {
			return "", &fs.PathError{Op: "rename", Path: p, Err: err}
		}
	case !errors.Is(err, unix.ENOENT):
		return "", &fs.PathError{Op: "stat", Path: p, Err: err}
	}
	if err := unix.Mkdirat(d.fd, name, 0o700); err != nil {
		return "", &fs.PathError{Op: "mkdir", Path: p, Err: err}
	}
	if uid != os.Geteuid() || gid != os.Getegid() {
		if err := unix.Fchownat(d.fd, name, uid, gid, unix.AT_SYMLINK_NOFOLLOW); err != nil {
			return "", &fs.PathError{Op: "chown", Path: p, Err: err}
		}
	}
	return p, nil
}
