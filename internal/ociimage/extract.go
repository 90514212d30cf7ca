package ociimage

import (
	"archive/tar"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"strings"
)

// extract unpacks the tar stream r into dir (which exists and is empty)
// through an os.Root, so that no name or link leads outside dir. chown
// keeps the entries' owners (only root can). Directory modes are set last:
// a read-only directory must still receive its entries.
func extract(r io.Reader, dir string, chown bool) error {
	root, err := os.OpenRoot(dir)
	if err != nil {
		return err
	}
	defer root.Close()
	type dirMode struct {
		name string
		mode fs.FileMode
	}
	var dirs []dirMode
	tr := tar.NewReader(r)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			return err
		}
		name, ok := entryName(h.Name)
		if !ok {
			return fmt.Errorf("entry %q leaves the image's root", h.Name)
		}
		if name == "." {
			continue
		}
		if d := path.Dir(name); d != "." {
			if err := root.MkdirAll(d, 0o755); err != nil {
				return err
			}
		}
		made, err := extractOne(root, tr, h, name)
		if err != nil {
			return fmt.Errorf("%s: %w", name, err)
		}
		if !made {
			continue
		}
		if h.Typeflag == tar.TypeDir {
			dirs = append(dirs, dirMode{name, fs.FileMode(h.Mode) & 0o1777})
		}
		if chown {
			if err := root.Lchown(name, h.Uid, h.Gid); err != nil {
				return fmt.Errorf("%s: %w", name, err)
			}
		}
	}
	for i := len(dirs) - 1; i >= 0; i-- {
		if err := root.Chmod(dirs[i].name, dirs[i].mode); err != nil {
			return err
		}
	}
	return nil
}

// extractOne makes one entry; made is false for the kinds skipped.
func extractOne(root *os.Root, tr *tar.Reader, h *tar.Header, name string) (made bool, err error) {
	switch h.Typeflag {
	case tar.TypeDir:
		if err := root.Mkdir(name, 0o755); err != nil && !errors.Is(err, fs.ErrExist) {
			return false, err
		}
		return true, nil
	case tar.TypeReg:
		root.Remove(name) // a later entry of the same name replaces it
		f, err := root.OpenFile(name, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o600)
		if err != nil {
			return false, err
		}
		_, err = io.Copy(f, tr)
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		if err == nil {
			// Set-uid and set-gid dropped: nothing in the sandbox gains
			// privileges (no_new_privs holds it anyway).
			err = root.Chmod(name, fs.FileMode(h.Mode)&0o777)
		}
		return err == nil, err
	case tar.TypeSymlink:
		root.Remove(name)
		return true, root.Symlink(h.Linkname, name)
	case tar.TypeLink:
		target, ok := entryName(h.Linkname)
		if !ok {
			return false, fmt.Errorf("hard link to %q leaves the image's root", h.Linkname)
		}
		root.Remove(name)
		return true, root.Link(target, name)
	}
	return false, nil
}

// entryName cleans a tar entry's name relative to the root ("." for the
// root itself); ok is false for one that climbs out of it.
func entryName(n string) (string, bool) {
	for _, part := range strings.Split(n, "/") {
		if part == ".." {
			return "", false
		}
	}
	c := path.Clean("/" + n)
	if c == "/" {
		return ".", true
	}
	return c[1:], true
}
