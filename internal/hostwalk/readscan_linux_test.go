package hostwalk

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/sandbox-run/sandbox-run/internal/sandboxtest"
)

func TestScanSpecial(t *testing.T) {
	root, _ := sandboxtest.SpecialTree(t)
	res, err := ScanSpecial(nil, root, DefaultScanLimits())
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, f := range res.Found {
		got = append(got, f.Kind+":"+f.Rel)
	}
	slices.Sort(got)
	want := []string{"fifo:a/pipe", "socket:a/b/docker.sock", "socket:agent.sock"}
	if !slices.Equal(got, want) {
		t.Errorf("found %q, want %q", got, want)
	}
	// root: agent.sock, a, link.sock; a: b, pipe, file; b: docker.sock.
	if res.Entries != 7 {
		t.Errorf("entries %d, want 7", res.Entries)
	}
	if res.Elapsed <= 0 {
		t.Errorf("elapsed %v: the cost was not measured", res.Elapsed)
	}
}

// TestScanSpecialSiblings: every sibling subtree is searched. The Lister
// reuses its listing, so a walk that went on reading a parent's entries
// after descending would read a child's instead and skip later siblings.
func TestScanSpecialSiblings(t *testing.T) {
	root := t.TempDir()
	var want []string
	for i := range 10 {
		d := filepath.Join(root, fmt.Sprintf("d%d", i))
		if err := os.MkdirAll(filepath.Join(d, "x"), 0o755); err != nil {
			t.Fatal(err)
		}
		for _, f := range []string{"f1", "f2", "f3"} {
			os.WriteFile(filepath.Join(d, f), nil, 0o644)
		}
		sandboxtest.SocketInode(t, filepath.Join(d, "s"))
		sandboxtest.SocketInode(t, filepath.Join(d, "x", "s"))
		want = append(want, fmt.Sprintf("d%d/s", i), fmt.Sprintf("d%d/x/s", i))
	}
	res, err := ScanSpecial(nil, root, DefaultScanLimits())
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, f := range res.Found {
		got = append(got, f.Rel)
	}
	slices.Sort(got)
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Errorf("found %q, want %q", got, want)
	}
}

func TestScanSpecialBounds(t *testing.T) {
	root, _ := sandboxtest.SpecialTree(t)
	for _, tt := range []struct {
		name  string
		lim   ScanLimits
		bound string
	}{
		{"entries", ScanLimits{Entries: 6, Depth: 64, Covered: 64}, "entries"},
		{"depth", ScanLimits{Entries: 100, Depth: 2, Covered: 64}, "depth"},
		{"covered", ScanLimits{Entries: 100, Depth: 64, Covered: 2}, "covered"},
		{"all within", ScanLimits{Entries: 7, Depth: 3, Covered: 3}, ""},
	} {
		t.Run(tt.name, func(t *testing.T) {
			_, err := ScanSpecial(nil, root, tt.lim)
			var be *ScanBoundError
			switch {
			case tt.bound == "" && err != nil:
				t.Fatalf("within the bounds: %v", err)
			case tt.bound == "":
			case !errors.As(err, &be) || be.Bound != tt.bound || be.Path != root:
				t.Fatalf("error %v, want a %s bound on %s", err, tt.bound, root)
			}
		})
	}
}

// TestScanSpecialUnlistable: a directory the scan cannot list is skipped
// when the caller cannot search it either, refused when it can (a socket
// at a known name in it would be reachable).
func TestScanSpecialUnlistable(t *testing.T) {
	if os.Geteuid() == 0 {
		t.Skip("root lists every directory; this case exists for an unprivileged caller only (CI runs it as sbxci)")
	}
	for _, tt := range []struct {
		mode os.FileMode
		ok   bool
	}{{0o000, true}, {0o100, false}, {0o700, true}} {
		t.Run(tt.mode.String(), func(t *testing.T) {
			root := t.TempDir()
			d := filepath.Join(root, "shut")
			os.Mkdir(d, 0o700)
			sandboxtest.SocketInode(t, filepath.Join(d, "s"))
			os.Chmod(d, tt.mode)
			t.Cleanup(func() { os.Chmod(d, 0o700) })
			_, err := ScanSpecial(nil, root, DefaultScanLimits())
			if (err == nil) != tt.ok {
				t.Fatalf("mode %v: error %v, want ok=%v", tt.mode, err, tt.ok)
			}
			if err != nil && !strings.Contains(err.Error(), "searchable") {
				t.Errorf("error %q does not say why", err)
			}
		})
	}
}
