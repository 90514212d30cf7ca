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

// naiveInside is the check this package exists to replace: it looks only at
// the path string it is given. Tests use it as a negative control.
func naiveInside(p string, writable []string) bool {
	for _, w := range writable {
		if inside(p, w) {
			return true
		}
	}
	return false
}

// wantEscape fails unless err is an *EscapeError of the given kind, matching
// ErrEscape, with the given link and writable dir (absolute; "" for none).
func wantEscape(t *testing.T, err error, kind, bind, link, writable string) {
	t.Helper()
	var e *EscapeError
	if !errors.As(err, &e) {
		t.Fatalf("err = %v; want *EscapeError", err)
	}
	if !errors.Is(err, ErrEscape) {
		t.Errorf("errors.Is(%v, ErrEscape) = false", err)
	}
	if e.Kind != kind || e.Bind != bind || e.Link != link || e.Writable != writable {
		t.Errorf("got %+v\nwant Kind=%s Bind=%s Link=%s Writable=%s", *e, kind, bind, link, writable)
	}
	msg := e.Error()
	if strings.Contains(msg, "\n") {
		t.Errorf("message spans lines: %q", msg)
	}
	for _, s := range []string{bind, link, writable} {
		if s != "" && !strings.Contains(msg, s) {
			t.Errorf("message %q does not name %s", msg, s)
		}
	}
}

func TestGuard(t *testing.T) {
	const (
		read = KindRead
		dest = KindDest
	)
	tests := []struct {
		name     string
		layout   []string
		writable []string // relative to root
		op       string   // KindRead or KindDest
		path     string   // relative to root
		// want: ok, or an escape naming link and writable (relative; "" none)
		ok           bool
		link, inW    string
		naiveAccepts bool // the negative control: a string check would let it through
	}{
		{name: "outside", layout: []string{"w/", "r/", "r/f"}, writable: []string{"w"}, op: read, path: "r/f", ok: true},
		{name: "sibling with a common prefix", layout: []string{"w/", "wx/"}, writable: []string{"w"}, op: read, path: "wx", ok: true},
		{name: "equal to a writable dir", layout: []string{"w/"}, writable: []string{"w"}, op: read, path: "w", inW: "w"},
		{name: "inside a writable dir", layout: []string{"w/", "w/f"}, writable: []string{"w"}, op: read, path: "w/f", inW: "w"},
		{name: "parent of a writable dir", layout: []string{"p/", "p/w/"}, writable: []string{"p/w"}, op: read, path: "p", ok: true},
		{name: "link outside into a writable dir", layout: []string{"w/", "w/secret", "s/", "s/l => ../w/secret"},
			writable: []string{"w"}, op: read, path: "s/l", link: "s/l", inW: "w", naiveAccepts: true},
		{name: "link in the middle into a writable dir", layout: []string{"w/", "w/d/", "s/", "s/l => $R/w"},
			writable: []string{"w"}, op: read, path: "s/l/d", link: "s/l", inW: "w", naiveAccepts: true},
		{name: "chain passing through a writable dir", layout: []string{"w/", "w/hop => ../t", "t/", "s/", "s/l => ../w/hop"},
			writable: []string{"w"}, op: read, path: "s/l", link: "w/hop", inW: "w", naiveAccepts: true},
		{name: "dot-dot through a writable dir", layout: []string{"w/", "t/", "l => w/..", "m => l/t"},
			writable: []string{"w"}, op: read, path: "m", link: "l", inW: "w", naiveAccepts: true},
		{name: "dangling link into a writable dir", layout: []string{"w/", "s/", "s/l => ../w/later"},
			writable: []string{"w"}, op: read, path: "s/l", link: "s/l", inW: "w", naiveAccepts: true},
		{name: "writable given through a link: resolved spelling", layout: []string{"real/", "wl => real"},
			writable: []string{"wl"}, op: read, path: "real", inW: "real", naiveAccepts: true},
		{name: "writable given through a link: given spelling", layout: []string{"real/", "wl => real"},
			writable: []string{"wl"}, op: read, path: "wl", link: "wl", inW: "wl"},
		{name: "target spelled through the given spelling", layout: []string{"real/", "wl => real", "s/", "s/l => ../wl/x"},
			writable: []string{"wl"}, op: read, path: "s/l", link: "s/l", inW: "wl", naiveAccepts: true},
		{name: "link elsewhere, not via a writable dir", layout: []string{"w/", "a/", "l => a"}, writable: []string{"w"},
			op: read, path: "l", ok: true},
		{name: "dest: plain dir inside", layout: []string{"w/", "w/.git/", "w/.git/hooks/"}, writable: []string{"w"},
			op: dest, path: "w/.git/hooks", ok: true},
		{name: "dest: missing inside", layout: []string{"w/"}, writable: []string{"w"}, op: dest, path: "w/.git/hooks", ok: true},
		{name: "dest: link to /etc", layout: []string{"w/", "w/.git/", "w/.git/hooks => /etc"}, writable: []string{"w"},
			op: dest, path: "w/.git/hooks", link: "w/.git/hooks", inW: "w"},
		{name: "dest: passes through a link", layout: []string{"w/", "w/.git => /etc"}, writable: []string{"w"},
			op: dest, path: "w/.git/hooks", link: "w/.git", inW: "w"},
		{name: "dest: link staying inside", layout: []string{"w/", "w/b/", "w/a => b"}, writable: []string{"w"},
			op: dest, path: "w/a", link: "w/a", inW: "w"},
		{name: "dest: link outside the writable set", layout: []string{"w/", "o/", "l => o"}, writable: []string{"w"},
			op: dest, path: "l", ok: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			root := tempRoot(t)
			build(t, root, tt.layout...)
			var writable []string
			for _, w := range tt.writable {
				writable = append(writable, at(root, w))
			}
			g, err := New(writable)
			if err != nil {
				t.Fatal(err)
			}
			p := at(root, tt.path)
			if tt.op == read {
				_, err = g.CheckRead(p)
			} else {
				err = g.CheckDest(p)
			}
			if tt.ok {
				if err != nil {
					t.Fatalf("%s %s: %v; want accepted", tt.op, tt.path, err)
				}
				return
			}
			link := ""
			if tt.link != "" {
				link = at(root, tt.link)
			}
			wantEscape(t, err, tt.op, p, link, at(root, tt.inW))
			if got := !naiveInside(p, writable); got != tt.naiveAccepts {
				t.Errorf("negative control: naive check accepts = %v, table says %v", got, tt.naiveAccepts)
			}
		})
	}
}

func TestNew(t *testing.T) {
	root := tempRoot(t)
	build(t, root, "w/", "other/", "w/sub => ../other", "w/real/", "f", "wl => w", "v/", "v/l => $R/other")
	tests := []struct {
		name     string
		writable []string
		wantErr  error
		escape   [2]string // link, writable, for an escape
	}{
		{name: "empty", writable: nil},
		{name: "nested real dir", writable: []string{"w", "w/real"}},
		{name: "same dir twice, two spellings", writable: []string{"w", "wl"}},
		{name: "link outside the set", writable: []string{"v/l", "w"}},
		{name: "through a link in another writable dir", writable: []string{"w", "w/sub"}, wantErr: ErrEscape,
			escape: [2]string{"w/sub", "w"}},
		{name: "order does not matter", writable: []string{"w/sub", "w"}, wantErr: ErrEscape,
			escape: [2]string{"w/sub", "w"}},
		{name: "through a link in the resolved spelling", writable: []string{"wl", "wl/sub"}, wantErr: ErrEscape,
			escape: [2]string{"w/sub", "w"}},
		{name: "missing", writable: []string{"nope"}, wantErr: fs.ErrNotExist},
		{name: "a file", writable: []string{"f"}, wantErr: syscall.ENOTDIR},
		{name: "relative", writable: []string{"w/../w"}, wantErr: fs.ErrInvalid},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var writable []string
			for _, w := range tt.writable {
				if strings.Contains(w, "..") {
					writable = append(writable, root+"/"+w)
				} else {
					writable = append(writable, at(root, w))
				}
			}
			g, err := New(writable)
			if tt.wantErr == nil {
				if err != nil {
					t.Fatal(err)
				}
				for _, r := range g.Writable() {
					if want, _ := filepath.EvalSymlinks(r.Path); want != r.Path || !r.Exists {
						t.Errorf("Writable() holds %s (exists=%v), resolved it is %s", r.Path, r.Exists, want)
					}
				}
				return
			}
			if !errors.Is(err, tt.wantErr) {
				t.Fatalf("New = %v; want %v", err, tt.wantErr)
			}
			if tt.wantErr == ErrEscape {
				var e *EscapeError
				errors.As(err, &e)
				wantEscape(t, err, KindWritable, e.Bind, at(root, tt.escape[0]), at(root, tt.escape[1]))
				if !strings.HasSuffix(e.Bind, "/sub") {
					t.Errorf("Bind = %s, want the writable dir reached through the link", e.Bind)
				}
			}
		})
	}
}

func TestWritableHoldsResolvedDirsOnce(t *testing.T) {
	root := tempRoot(t)
	build(t, root, "w/", "wl => w", "x/")
	g, err := New([]string{at(root, "wl"), at(root, "x"), at(root, "w")})
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, r := range g.Writable() {
		got = append(got, r.Path)
	}
	if want := []string{at(root, "w"), at(root, "x")}; strings.Join(got, " ") != strings.Join(want, " ") {
		t.Errorf("Writable() = %q, want %q", got, want)
	}
}

// TestTwoSessionAttack: run 1 replaces W/sub with a link to a sibling S
// outside W; run 2 asks for --read W/sub and must be refused, with an error
// naming the bind, the link and W.
func TestTwoSessionAttack(t *testing.T) {
	root := tempRoot(t)
	build(t, root, "W/", "W/sub/", "S/", "S/id_rsa")
	w, s, sub := at(root, "W"), at(root, "S"), at(root, "W/sub")

	// Run 1, as the sandboxed command would do it.
	if err := os.Remove(sub); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("../S", sub); err != nil {
		t.Fatal(err)
	}

	// Run 2.
	g, err := New([]string{w})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := g.CheckRead(s); err != nil {
		t.Fatalf("control: S itself must be readable: %v", err)
	}
	r, err := g.CheckRead(sub)
	if err == nil {
		t.Fatalf("CheckRead(W/sub) accepted, resolving to %s", r.Path)
	}
	wantEscape(t, err, KindRead, sub, sub, w)
	t.Logf("refusal: %v", err)
}

// TestDestinationAttack: W/.git/hooks replaced by a link to /etc before the
// run; a protected-path mount on W/.git/hooks must be refused, not land on
// /etc.
func TestDestinationAttack(t *testing.T) {
	root := tempRoot(t)
	build(t, root, "W/", "W/.git/", "W/.git/hooks/")
	w, hooks := at(root, "W"), at(root, "W/.git/hooks")
	g, err := New([]string{w})
	if err != nil {
		t.Fatal(err)
	}
	if err := g.CheckDest(hooks); err != nil {
		t.Fatalf("control: the real hooks dir is a valid destination: %v", err)
	}
	if err := os.Remove(hooks); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("/etc", hooks); err != nil {
		t.Fatal(err)
	}
	err = g.CheckDest(hooks)
	wantEscape(t, err, KindDest, hooks, hooks, w)
	t.Logf("refusal: %v", err)
}

// TestSameDirectoryAlias checks the same-inode rule without a bind mount: a
// walk step that is W's directory under another path counts as inside W.
func TestSameDirectoryAlias(t *testing.T) {
	root := tempRoot(t)
	build(t, root, "W/", "alias/", "alias/f")
	w := at(root, "W")
	g, err := New([]string{w})
	if err != nil {
		t.Fatal(err)
	}
	r, err := Resolve(at(root, "alias/f"))
	if err != nil {
		t.Fatal(err)
	}
	if e := g.escape(r.Path, r, KindRead, -1); e != nil {
		t.Fatalf("control: alias is a different dir, got %v", e)
	}
	// Pretend alias/ is a bind mount of W: same device and inode.
	for i, s := range r.steps {
		if s.path == at(root, "alias") {
			r.steps[i].fi = g.dirs[0].res.final
		}
	}
	e := g.escape(r.Path, r, KindRead, -1)
	if e == nil {
		t.Fatal("a directory with W's inode was not treated as W")
	}
	if !strings.Contains(e.Writable, at(root, "alias")) || !strings.Contains(e.Writable, w) {
		t.Errorf("Writable = %q, want it to name the alias and W", e.Writable)
	}
}

func TestCheckErrorsAreWrapped(t *testing.T) {
	root := tempRoot(t)
	build(t, root, "w/", "l => l")
	g, err := New([]string{at(root, "w")})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := g.CheckRead(at(root, "l")); !errors.Is(err, syscall.ELOOP) || errors.Is(err, ErrEscape) {
		t.Errorf("CheckRead(loop) = %v; want ELOOP, not an escape", err)
	}
	if err := g.CheckDest(at(root, "l/x")); !errors.Is(err, syscall.ELOOP) {
		t.Errorf("CheckDest(loop) = %v; want ELOOP", err)
	}
	if _, err := g.CheckRead("relative"); !errors.Is(err, fs.ErrInvalid) {
		t.Errorf("CheckRead(relative) = %v; want fs.ErrInvalid", err)
	}
	r, err := g.CheckRead(at(root, "missing"))
	if err != nil || r.Exists {
		t.Errorf("CheckRead(missing) = %+v, %v; want Exists=false, no error", r, err)
	}
}
