//go:build unix

package pathguard

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// fuzzBytes hands out the fuzz input one byte at a time, then zeros.
type fuzzBytes []byte

func (b *fuzzBytes) next() int {
	if len(*b) == 0 {
		return 0
	}
	c := (*b)[0]
	*b = (*b)[1:]
	return int(c)
}

var fuzzNames = []string{"a", "b", "c", "w"}

// relPath is a path of 1 to 3 names below the root.
func (b *fuzzBytes) relPath() string {
	n := 1 + b.next()%3
	parts := make([]string, n)
	for i := range parts {
		parts[i] = fuzzNames[b.next()%len(fuzzNames)]
	}
	return strings.Join(parts, "/")
}

// target is a link target: relative, absolute below root, or "/", with
// "." and ".." mixed in and sometimes a trailing slash.
func (b *fuzzBytes) target(root string) string {
	comps := append([]string{".", ".."}, fuzzNames...)
	n := 1 + b.next()%3
	parts := make([]string, n)
	for i := range parts {
		parts[i] = comps[b.next()%len(comps)]
	}
	t := strings.Join(parts, "/")
	switch b.next() % 8 {
	case 0, 1:
		t = root + "/" + t
	case 2:
		t += "/"
	case 3:
		if b.next()%4 == 0 {
			t = "/"
		}
	}
	return t
}

// safeParent reports whether every directory above rel (inside root) is a
// real directory, so that creating rel cannot write outside root through a
// link.
func safeParent(root, rel string) bool {
	dir := root
	parts := strings.Split(rel, "/")
	for _, p := range parts[:len(parts)-1] {
		dir = filepath.Join(dir, p)
		fi, err := os.Lstat(dir)
		if err != nil || !fi.IsDir() {
			return false
		}
	}
	return true
}

// buildFuzzTree creates up to 14 dirs, files and links under root and
// returns the paths it created.
func buildFuzzTree(b *fuzzBytes, root string) (created []string) {
	defer func() {
		if len(created) == 0 {
			created = append(created, root)
		}
	}()
	for range 1 + b.next()%14 {
		op, rel := b.next()%6, b.relPath()
		if !safeParent(root, rel) {
			continue
		}
		p := filepath.Join(root, rel)
		switch op {
		case 0, 1, 2:
			if os.Mkdir(p, 0o755) == nil {
				created = append(created, p)
			}
		case 3, 4:
			if os.Symlink(b.target(root), p) == nil {
				created = append(created, p)
			}
		case 5:
			if f, err := os.OpenFile(p, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o644); err == nil {
				f.Close()
				created = append(created, p)
			}
		}
	}
	return created
}

// pick returns one of the created paths, or sometimes any path of the
// names, existing or not.
func (b *fuzzBytes) pick(root string, created []string) string {
	if i := b.next(); i%4 != 0 {
		return created[i%len(created)]
	}
	return filepath.Join(root, b.relPath())
}

// insideOracle is "inside or equal", written independently of inside.
func insideOracle(p, dir string) bool {
	rel, err := filepath.Rel(dir, p)
	return err == nil && rel != ".." && !strings.HasPrefix(rel, "../")
}

func FuzzResolve(f *testing.F) {
	f.Add([]byte{})
	f.Add([]byte{3, 0, 0, 0, 3, 0, 1, 2, 0, 0, 0})
	// w/ as a dir, a -> w (link outside into the writable dir), bind a.
	f.Add([]byte{2, 0, 0, 3, 0, 3, 0, 4, 0, 0, 0, 0, 1, 0, 0, 0, 3, 0, 0})
	// w/b -> .. style loops and dot-dot after links.
	f.Add([]byte{5, 0, 0, 3, 3, 1, 3, 0, 3, 1, 3, 2, 1, 1, 1, 2, 3, 0, 1, 2, 1, 0, 2, 0, 1, 1})
	f.Add([]byte("writable dirs and links all the way down, some of them loops"))
	f.Fuzz(func(t *testing.T, data []byte) {
		b := fuzzBytes(data)
		root := tempRoot(t)
		created := buildFuzzTree(&b, root)

		var writable []string
		for range 1 + b.next()%2 {
			writable = append(writable, b.pick(root, created))
		}
		var binds []string
		for range 4 {
			binds = append(binds, b.pick(root, created))
		}
		for _, p := range append(binds, writable...) {
			checkAgainstKernel(t, p)
		}

		g, err := New(writable)
		var esc *EscapeError
		switch {
		case err == nil:
		case errors.As(err, &esc):
			if esc.Kind != KindWritable || esc.Link == "" {
				t.Fatalf("New(%q) refused with %+v", writable, esc)
			}
			return
		case errors.Is(err, fs.ErrNotExist), errors.Is(err, syscall.ENOTDIR), errors.Is(err, syscall.ELOOP):
			return // not a usable writable set
		default:
			t.Fatalf("New(%q): %v", writable, err)
		}

		// Both spellings, computed by the oracle.
		var spellings []string
		for _, w := range writable {
			real, err := filepath.EvalSymlinks(w)
			if err != nil {
				t.Fatalf("writable %s accepted but EvalSymlinks fails: %v", w, err)
			}
			spellings = append(spellings, w, real)
		}
		for _, p := range binds {
			r, err := g.CheckRead(p)
			if err != nil {
				if errors.As(err, &esc) && !contains(spellings, esc.Writable) &&
					!strings.Contains(esc.Writable, "the same directory as") {
					t.Fatalf("CheckRead(%s) names %s, not a writable dir %q", p, esc.Writable, spellings)
				}
				continue
			}
			for _, v := range r.Visited {
				for _, w := range spellings {
					if insideOracle(v, w) {
						t.Fatalf("CheckRead(%s) accepted, but visited %s inside writable %s\nvisited %q", p, v, w, r.Visited)
					}
				}
			}
			// Whatever the implementation recorded: every prefix of the
			// bind, as the kernel resolves it, lies outside the set.
			for q := p; q != "/"; q = filepath.Dir(q) {
				real, err := filepath.EvalSymlinks(q)
				if err != nil {
					continue
				}
				for _, w := range spellings {
					if insideOracle(real, w) {
						t.Fatalf("CheckRead(%s) accepted, but its prefix %s resolves to %s inside writable %s", p, q, real, w)
					}
				}
			}
			if r.Exists {
				f, err := r.Open()
				if err != nil {
					t.Fatalf("Open(%s): %v", r.Path, err)
				}
				var a, b syscall.Stat_t
				errA := syscall.Fstat(int(f.Fd()), &a)
				errB := syscall.Stat(p, &b)
				f.Close()
				if errA != nil || errB != nil || a.Dev != b.Dev || a.Ino != b.Ino {
					t.Fatalf("Open(%s) gave %d:%d, the kernel resolves %s to %d:%d (%v %v)", r.Path, a.Dev, a.Ino, p, b.Dev, b.Ino, errA, errB)
				}
			}
		}
	})
}

// checkAgainstKernel compares Resolve(p) with what the kernel (stat) and
// filepath.EvalSymlinks make of p.
func checkAgainstKernel(t *testing.T, p string) {
	t.Helper()
	r, err := Resolve(p)
	kfi, kerr := os.Stat(p)
	for i := 0; i < 20 && errors.Is(kerr, syscall.ELOOP); i++ {
		kfi, kerr = os.Stat(p) // a spurious ELOOP: see kernelStat
	}
	switch {
	case kerr == nil:
		if err != nil || !r.Exists {
			t.Fatalf("kernel resolves %s, Resolve = %+v, %v", p, r, err)
		}
		if fi, err := os.Lstat(r.Path); err != nil || !os.SameFile(fi, kfi) {
			t.Fatalf("Resolve(%s) = %s, not the kernel's inode", p, r.Path)
		}
		if real, err := filepath.EvalSymlinks(p); err == nil && real != r.Path {
			t.Fatalf("Resolve(%s) = %s, EvalSymlinks = %s", p, r.Path, real)
		}
	case errors.Is(kerr, syscall.ELOOP), errors.Is(kerr, syscall.ENOTDIR):
		want := kerr.(*fs.PathError).Err
		if !errors.Is(err, want) {
			t.Fatalf("kernel: %v; Resolve(%s) = %+v, %v", kerr, p, r, err)
		}
	case errors.Is(kerr, fs.ErrNotExist):
		if err == nil && r.Exists {
			t.Fatalf("kernel: %v; Resolve(%s) says %s exists", kerr, p, r.Path)
		}
		if err != nil && !errors.Is(err, fs.ErrNotExist) {
			t.Fatalf("kernel: %v; Resolve(%s): %v", kerr, p, err)
		}
	default:
		t.Fatalf("stat %s: %v", p, kerr)
	}
}

func contains(list []string, s string) bool {
	for _, e := range list {
		if e == s {
			return true
		}
	}
	return false
}
