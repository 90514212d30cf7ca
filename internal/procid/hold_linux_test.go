package procid

import (
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"
)

// TestHoldAndProbe: a directory or file held (HoldAt) probes Alive, also
// from this process's own other descriptor (flock locks an open file, not
// a process), and Ended once released; one never held probes Ended too,
// which is why only what its holder marks held may be probed. A link to
// a held directory is not followed (Unknown, and not held), a missing
// name is Unknown, and a FIFO in a name's place does not block.
func TestHoldAndProbe(t *testing.T) {
	dir := t.TempDir()
	for _, n := range []string{"held", "never"} {
		if err := os.Mkdir(filepath.Join(dir, n), 0o700); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(dir, "file"), nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("held", filepath.Join(dir, "link")); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Mkfifo(filepath.Join(dir, "fifo"), 0o600); err != nil {
		t.Fatal(err)
	}
	d, err := os.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	dfd := int(d.Fd())

	releaseDir, ok1 := HoldAt(dfd, "held")
	releaseFile, ok2 := HoldAt(dfd, "file")
	if !ok1 || !ok2 {
		t.Fatalf("HoldAt: dir %v, file %v", ok1, ok2)
	}
	if _, ok := HoldAt(dfd, "link"); ok {
		t.Error("HoldAt took a lock through a link")
	}
	for _, tc := range []struct {
		name string
		want State
	}{
		{"held", Alive},
		{"file", Alive},
		{"never", Ended},
		{"link", Unknown},
		{"missing", Unknown},
	} {
		if got := ProbeAt(dfd, tc.name); got != tc.want {
			t.Errorf("ProbeAt(%s) = %v, want %v", tc.name, got, tc.want)
		}
	}
	done := make(chan State, 1)
	go func() { done <- ProbeAt(dfd, "fifo") }()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Error("ProbeAt blocked on a FIFO")
	}

	releaseDir()
	releaseFile()
	for _, n := range []string{"held", "file"} {
		if got := ProbeAt(dfd, n); got != Ended {
			t.Errorf("released: ProbeAt(%s) = %v, want Ended", n, got)
		}
	}
}
