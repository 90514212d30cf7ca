package pathguard

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
)

// build creates a tree under root from a tiny layout language, one entry per
// string, parents first:
//
//	"a/"         directory a
//	"a/f"        empty file a/f
//	"a/l => ../c" symbolic link a/l with target ../c ($R in a target is root)
func build(t testing.TB, root string, layout ...string) {
	t.Helper()
	for _, e := range layout {
		name, target, isLink := strings.Cut(e, " => ")
		p := filepath.Join(root, name)
		var err error
		switch {
		case isLink:
			err = os.Symlink(strings.ReplaceAll(target, "$R", root), p)
		case strings.HasSuffix(name, "/"):
			err = os.Mkdir(p, 0o755)
		default:
			err = os.WriteFile(p, nil, 0o644)
		}
		if err != nil {
			t.Fatalf("layout %q: %v", e, err)
		}
	}
}

// tempRoot returns a fresh directory spelled without symbolic links, so that
// expected paths can be written relative to it.
func tempRoot(t testing.TB) string {
	t.Helper()
	root, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	return root
}

// at joins root and a relative name of the layout language ("" is root).
func at(root, rel string) string {
	if rel == "" {
		return root
	}
	return filepath.Join(root, rel)
}

func chain(n int, end string) []string {
	var l []string
	for i := n; i > 0; i-- {
		l = append(l, fmt.Sprintf("l%d => l%d", i, i-1))
	}
	return append(l, "l0 => "+end)
}

// kernelStat is os.Stat's error for p, retried on ELOOP. A walk that
// falls back from RCU mode (a mount or unmount anywhere on the machine
// meanwhile, as CI's sandboxes make beside this test) counts again the
// links it had followed, so a path of exactly 40 links sometimes fails
// where it resolves on a quiet machine (Linux 6.18: 130 of 200,000 stats
// with a mount loop in another namespace, none without). A path of 41
// links fails every time.
func kernelStat(p string) error {
	var err error
	for range 20 {
		if _, err = os.Stat(p); !errors.Is(err, syscall.ELOOP) {
			return err
		}
	}
	return err
}

func TestResolve(t *testing.T) {
	tests := []struct {
		name    string
		layout  []string
		path    string   // relative to root
		want    string   // relative to root; "/" for the host root
		exists  bool     // want Exists
		visits  []string // relative to root; must all be in Visited
		wantErr error    // errors.Is target; want empty
	}{
		{name: "plain", layout: []string{"a/", "a/b/"}, path: "a/b", want: "a/b", exists: true,
			visits: []string{"", "a", "a/b"}},
		{name: "file", layout: []string{"a/", "a/f"}, path: "a/f", want: "a/f", exists: true},
		{name: "link in the middle", layout: []string{"a/", "a/b/", "l => a"}, path: "l/b", want: "a/b", exists: true,
			visits: []string{"l", "a", "a/b"}},
		{name: "link at the end", layout: []string{"a/", "l => a"}, path: "l", want: "a", exists: true,
			visits: []string{"l", "a"}},
		{name: "link to a file", layout: []string{"f", "l => f"}, path: "l", want: "f", exists: true},
		{name: "chain", layout: []string{"a/", "l1 => l2", "l2 => l3", "l3 => a"}, path: "l1", want: "a", exists: true,
			visits: []string{"l1", "l2", "l3", "a"}},
		{name: "relative target from the link's dir", layout: []string{"a/", "d/", "d/l => ../a"}, path: "d/l", want: "a", exists: true},
		{name: "dot-dot after a link is physical", layout: []string{"a/", "a/b/", "a/x/", "x/", "l => a/b", "m => l/../x"},
			path: "m", want: "a/x", exists: true}, // lexically it would be x
		{name: "dot-dot after a link reaches the link's target parent", layout: []string{"a/", "a/b/", "l => a/b", "m => l/.."},
			path: "m", want: "a", exists: true, visits: []string{"m", "l", "a/b"}},
		{name: "dot-dot after a link in a subdir", layout: []string{"p/", "p/q/", "s/", "s/l => ../p/q", "s/m => l/../../p"},
			path: "s/m", want: "p", exists: true},
		{name: "link to dot", layout: []string{"d/", "d/l => ."}, path: "d/l", want: "d", exists: true},
		{name: "link to dot-dot", layout: []string{"d/", "d/l => .."}, path: "d/l", want: "", exists: true},
		{name: "absolute target", layout: []string{"a/", "a/b/", "l => $R/a"}, path: "l/b", want: "a/b", exists: true,
			visits: []string{"l", "a", "a/b"}},
		{name: "absolute target to /", layout: []string{"l => /"}, path: "l", want: "/", exists: true},
		{name: "target with repeated slashes", layout: []string{"a/", "a/b/", "l => a//b/"}, path: "l", want: "a/b", exists: true},
		{name: "dangling link", layout: []string{"l => nope"}, path: "l", want: "nope", exists: false,
			visits: []string{"l", "nope"}},
		{name: "dangling link, deeper", layout: []string{"a/", "l => a/nope/x"}, path: "l", want: "a/nope/x", exists: false},
		{name: "dangling link in the middle", layout: []string{"l => nope"}, path: "l/z", want: "nope/z", exists: false},
		{name: "missing component", layout: []string{"a/"}, path: "a/nope/x", want: "a/nope/x", exists: false},
		{name: "missing then dot-dot", layout: []string{"a/", "l => nope/../a"}, path: "l", wantErr: fs.ErrNotExist},
		{name: "file then component", layout: []string{"f"}, path: "f/x", wantErr: syscall.ENOTDIR},
		{name: "link to file with trailing slash", layout: []string{"f", "l => f/"}, path: "l", wantErr: syscall.ENOTDIR},
		{name: "file then dot-dot", layout: []string{"a/", "a/f", "l => a/f/.."}, path: "l", wantErr: syscall.ENOTDIR},
		{name: "empty-ish target", layout: []string{"a/", "l => ///"}, path: "l", want: "/", exists: true},
		{name: "self loop", layout: []string{"l => l"}, path: "l", wantErr: syscall.ELOOP},
		{name: "two-link loop", layout: []string{"l1 => l2", "l2 => l1"}, path: "l1", wantErr: syscall.ELOOP},
		{name: "loop through a dir", layout: []string{"d/", "d/l => ../d/l"}, path: "d/l", wantErr: syscall.ELOOP},
		{name: "40 links", layout: append([]string{"a/"}, chain(39, "a")...), path: "l39", want: "a", exists: true},
		{name: "41 links", layout: append([]string{"a/"}, chain(40, "a")...), path: "l40", wantErr: syscall.ELOOP},
		{name: "40 links via repetition", layout: []string{"a/", "l => .", "m => " + strings.Repeat("l/", 40) + "a"},
			path: "m", wantErr: syscall.ELOOP}, // m itself is the 41st
		{name: "39 repeated plus one", layout: []string{"a/", "l => .", "m => " + strings.Repeat("l/", 39) + "a"},
			path: "m", want: "a", exists: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			root := tempRoot(t)
			build(t, root, tt.layout...)
			p := at(root, tt.path)
			r, err := Resolve(p)
			kerr := kernelStat(p) // the kernel, for the errno
			if tt.wantErr != nil {
				if !errors.Is(err, tt.wantErr) {
					t.Fatalf("Resolve(%s) = %+v, %v; want error %v", tt.path, r, err, tt.wantErr)
				}
				if !errors.Is(kerr, tt.wantErr) {
					t.Errorf("kernel says %v, test wants %v: the table is wrong", kerr, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("Resolve(%s): %v", tt.path, err)
			}
			want := tt.want
			if want != "/" {
				want = at(root, want)
			}
			if r.Path != want || r.Exists != tt.exists {
				t.Errorf("Resolve(%s) = %s exists=%v; want %s exists=%v", tt.path, r.Path, r.Exists, want, tt.exists)
			}
			if tt.exists != (kerr == nil) {
				t.Errorf("kernel stat error %v, but exists=%v in the table", kerr, tt.exists)
			}
			if r.Exists {
				oracle, err := filepath.EvalSymlinks(p)
				if err != nil || oracle != r.Path {
					t.Errorf("EvalSymlinks(%s) = %s, %v; Resolve gave %s", p, oracle, err, r.Path)
				}
			}
			for _, v := range tt.visits {
				if !slices.Contains(r.Visited, at(root, v)) {
					t.Errorf("Visited lacks %s: %q", at(root, v), r.Visited)
				}
			}
			if r.Visited[0] != "/" {
				t.Errorf("Visited[0] = %q, want /", r.Visited[0])
			}
		})
	}
}

func TestResolveRefusesUncleanPaths(t *testing.T) {
	for _, p := range []string{"", "a/b", "./a", "/a/../b", "/a/", "//a", "/a/./b"} {
		if r, err := Resolve(p); !errors.Is(err, fs.ErrInvalid) {
			t.Errorf("Resolve(%q) = %+v, %v; want error wrapping fs.ErrInvalid", p, r, err)
		}
	}
}

func TestInside(t *testing.T) {
	tests := []struct {
		p, dir string
		want   bool
	}{
		{"/a/b", "/a/b", true},
		{"/a/b/c", "/a/b", true},
		{"/a/bc", "/a/b", false},
		{"/a", "/a/b", false},
		{"/a/b", "/", true},
		{"/", "/", true},
		{"/", "/a", false},
		{"/ab/c", "/a", false},
	}
	for _, tt := range tests {
		if got := inside(tt.p, tt.dir); got != tt.want {
			t.Errorf("inside(%q, %q) = %v, want %v", tt.p, tt.dir, got, tt.want)
		}
	}
}

func TestPushComponents(t *testing.T) {
	tests := []struct {
		target string
		want   []string // in the order they are walked
	}{
		{"a/b", []string{"a", "b"}},
		{"/a//b/", []string{"a", "b", "."}},
		{"../x", []string{"..", "x"}},
		{"/", nil},
		{"///", nil},
		{"a", []string{"a"}},
	}
	for _, tt := range tests {
		got := pushComponents(nil, tt.target)
		slices.Reverse(got)
		if !slices.Equal(got, tt.want) {
			t.Errorf("pushComponents(%q) walks %q, want %q", tt.target, got, tt.want)
		}
	}
}

func BenchmarkResolve(b *testing.B) {
	root := tempRoot(b)
	build(b, root, "usr/", "usr/lib/", "usr/lib/x/", "usr/lib/x/libc.so", "lib => usr/lib")
	for _, bm := range []struct{ name, path string }{
		{"4 components", "usr/lib/x/libc.so"},
		{"link in the middle", "lib/x/libc.so"},
	} {
		p := at(root, bm.path)
		b.Run(bm.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, err := Resolve(p); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
