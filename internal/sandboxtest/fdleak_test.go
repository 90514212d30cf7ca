package sandboxtest

import (
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// TestLeakedFDs: a file or pipe left open after the snapshot is reported by
// number and target, one closed again is not, and without a snapshot (no
// /proc) nothing is.
func TestLeakedFDs(t *testing.T) {
	if leakedFDs(nil) != nil {
		t.Errorf("leakedFDs(nil) reported descriptors")
	}
	if runtime.GOOS != "linux" {
		t.Skip("descriptors are listed from Linux's /proc/self/fd")
	}
	dir, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "f")
	if err := os.WriteFile(path, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	openFile := func() ([]*os.File, error) { f, err := os.Open(path); return []*os.File{f}, err }
	openPipe := func() ([]*os.File, error) { r, w, err := os.Pipe(); return []*os.File{r, w}, err }
	tests := []struct {
		name   string
		open   func() ([]*os.File, error)
		close  bool   // close before the check
		target string // what the open descriptors point at (a prefix)
	}{
		{"an open file is reported", openFile, false, path},
		{"a closed file is not", openFile, true, path},
		{"an open pipe is reported", openPipe, false, "pipe:["},
		{"a closed pipe is not", openPipe, true, "pipe:["},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			before := openFDs()
			files, err := tc.open()
			if err != nil {
				t.Fatal(err)
			}
			var want []string
			for _, f := range files {
				if tc.close {
					f.Close()
				} else {
					defer f.Close()
					want = append(want, strconv.Itoa(int(f.Fd()))+" -> "+tc.target)
				}
			}
			got := leakedFDs(before)
			if !slices.EqualFunc(got, want, strings.HasPrefix) {
				t.Errorf("leaked %q, want %q", got, want)
			}
		})
	}
}
