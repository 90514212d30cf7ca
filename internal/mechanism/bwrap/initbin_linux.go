package bwrap

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"

	"golang.org/x/sys/unix"

	"github.com/sandbox-run/sandbox-run/internal/fault"
	"github.com/sandbox-run/sandbox-run/internal/mechanism"
	"github.com/sandbox-run/sandbox-run/pathguard"
)

// openInit opens the binary bwrap executes as init: opts.Init when it is
// usable (usableInit), otherwise this one (O_PATH).
func (r *bwRun) openInit() (*os.File, error) {
	if ib := initPath(r.opts.Init); ib.Path != "" {
		f, err := usableInit(ib, r.pl.Guard, r.uid, r.gid)
		if err == nil {
			r.log.Debug("init", "binary", f.Name())
			return f, nil
		}
		r.log.Debug("init: this binary", "not", ib.Path, "because", err.Error())
	}
	self, err := os.OpenFile(selfPath(r.opts), unix.O_PATH|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, fault.New("cannot open sandbox-run's own binary", err.Error(), "run sandbox-run from a readable file")
	}
	r.log.Debug("init", "binary", self.Name())
	return self, nil
}

// initPath is ib with Path set from Beside when it is empty: the file of
// that name beside this executable; Path stays empty when the executable
// cannot be found.
func initPath(ib mechanism.InitBinary) mechanism.InitBinary {
	if ib.Path != "" || ib.Beside == "" {
		return ib
	}
	if exe, err := os.Executable(); err == nil {
		ib.Path = filepath.Join(filepath.Dir(exe), ib.Beside)
	}
	return ib
}

// usableInit opens ib.Path for bwrap to execute as init, if it is the
// build ib.BuildID names, no path its resolution visits is or lies in a
// writable directory (g.CheckRead, as for any read-only bind: the command
// could replace it for the next run), it is a regular file and uid, gid
// may execute it. The descriptor returned (O_PATH) is the inode checked.
func usableInit(ib mechanism.InitBinary, g *pathguard.Guard, uid, gid int) (*os.File, error) {
	if ib.BuildID == "" {
		return nil, errors.New("no build ID to check it against")
	}
	res, err := g.CheckRead(ib.Path)
	if err != nil {
		return nil, err
	}
	f, err := res.Open()
	if err != nil {
		return nil, err
	}
	if err := checkInit(f, res.Path, ib.BuildID, uid, gid); err != nil {
		f.Close()
		return nil, err
	}
	return f, nil
}

// checkInit reads the file f (O_PATH) through a readable descriptor of
// the same inode: a regular file that uid, gid may execute, with Go build
// ID want.
func checkInit(f *os.File, path, want string, uid, gid int) error {
	rd, err := os.Open("/proc/self/fd/" + strconv.Itoa(int(f.Fd())))
	if err != nil {
		return err
	}
	defer rd.Close()
	fi, err := rd.Stat()
	switch {
	case err != nil:
		return err
	case !fi.Mode().IsRegular():
		return errors.New("not a regular file")
	case !executableBy(path, fi, uid, gid):
		return fmt.Errorf("not executable by uid %d", uid)
	}
	id, err := goBuildID(rd)
	if err == nil && id != want {
		err = fmt.Errorf("build ID %s, not %s: another build", id, want)
	}
	return err
}
