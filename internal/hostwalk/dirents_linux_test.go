package hostwalk

import (
	"encoding/binary"
	"errors"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

// TestListerTypes: every file type comes back with the type os.ReadDir
// gives it, "." and ".." never.
func TestListerTypes(t *testing.T) {
	d := t.TempDir()
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(os.WriteFile(filepath.Join(d, "file"), nil, 0o644))
	must(os.Mkdir(filepath.Join(d, "dir"), 0o755))
	must(os.Symlink("dir", filepath.Join(d, "link")))
	must(unix.Mkfifo(filepath.Join(d, "fifo"), 0o644))
	ln, err := net.Listen("unix", filepath.Join(d, "sock"))
	must(err)
	defer ln.Close()
	got := listPath(t, d)
	want := map[string]fs.FileMode{}
	ents, err := os.ReadDir(d)
	must(err)
	for _, e := range ents {
		want[e.Name()] = e.Type()
	}
	if len(want) != 5 {
		t.Fatalf("control: os.ReadDir saw %d entries, want 5", len(want))
	}
	if len(got) != len(want) {
		t.Fatalf("listed %v, want %v", got, want)
	}
	for _, e := range got {
		if m, ok := want[e.Name]; !ok || m != e.Mode {
			t.Errorf("%s: mode %v, os.ReadDir says %v (present %v)", e.Name, e.Mode, m, ok)
		}
	}
}

// TestListerLargeDir: a directory whose listing takes several getdents
// calls comes back whole, names intact, and the bound stops it.
func TestListerLargeDir(t *testing.T) {
	d := t.TempDir()
	var want []string
	for i := 0; i < 1500; i++ {
		name := strings.Repeat("n", 40) + string(rune('a'+i%26)) + "-" + filepath.Base(t.Name()) + "-" + strconv.Itoa(i)
		if err := os.WriteFile(filepath.Join(d, name), nil, 0o644); err != nil {
			t.Fatal(err)
		}
		want = append(want, name)
	}
	var names []string
	for _, e := range listPath(t, d) {
		names = append(names, e.Name)
	}
	slices.Sort(names)
	slices.Sort(want)
	if !slices.Equal(names, want) {
		t.Fatalf("listed %d names, want %d (or they differ)", len(names), len(want))
	}
	fd := openDir(t, d)
	var l Lister
	if _, err := l.List(fd, 1000); !errors.Is(err, errTooMany) {
		t.Errorf("bound 1000 over 1500 entries: err %v, want errTooMany", err)
	}
}

// TestListerParse: a record of unknown type is lstat'ed through the
// directory (never followed), one that is gone is left out, and a record
// that does not fit its buffer is an error.
func TestListerParse(t *testing.T) {
	d := t.TempDir()
	if err := os.Symlink("/", filepath.Join(d, "link")); err != nil {
		t.Fatal(err)
	}
	fd := openDir(t, d)
	rec := func(name string, typ byte) []byte {
		n := (19 + len(name) + 1 + 7) &^ 7
		b := make([]byte, n)
		binary.NativeEndian.PutUint16(b[16:18], uint16(n))
		b[18] = typ
		copy(b[19:], name)
		return b
	}
	var l Lister
	buf := append(append(append(rec("link", unix.DT_UNKNOWN), rec("gone", unix.DT_UNKNOWN)...), rec(".", unix.DT_DIR)...), rec("f", unix.DT_REG)...)
	if err := l.parse(fd, buf); err != nil {
		t.Fatal(err)
	}
	if len(l.ents) != 2 || l.ents[0].mode != fs.ModeSymlink || l.ents[1].mode != 0 {
		t.Errorf("entries %+v, want link (a symlink, not followed to /) and f", l.ents)
	}
	bad := rec("x", unix.DT_REG)
	binary.NativeEndian.PutUint16(bad[16:18], uint16(len(bad)+8))
	if err := (&Lister{}).parse(fd, bad); !errors.Is(err, errBadDirent) {
		t.Errorf("record longer than its buffer: err %v, want errBadDirent", err)
	}
}

func listPath(t *testing.T, d string) Dirents {
	t.Helper()
	var l Lister
	ents, err := l.List(openDir(t, d), 0)
	if err != nil {
		t.Fatal(err)
	}
	return ents
}

func openDir(t *testing.T, d string) int {
	t.Helper()
	fd, err := unix.Open(d, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { unix.Close(fd) })
	return fd
}
