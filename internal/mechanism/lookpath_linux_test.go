package mechanism

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// lookPath answers as exec.LookPath does for the same PATH (first match
// wins, a file that is not executable or a directory is passed over, a
// relative directory's match is refused with ErrDot) and tries each
// directory once, however often PATH names it.
func TestLookPathTriesEachDirOnce(t *testing.T) {
	base := t.TempDir()
	dir := func(name string) string {
		d := filepath.Join(base, name)
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
		return d
	}
	empty, noexec, isdir, first, second := dir("empty"), dir("noexec"), dir("isdir"), dir("first"), dir("second")
	os.WriteFile(filepath.Join(noexec, "tool"), []byte("#!/bin/sh\n"), 0o644)
	os.Mkdir(filepath.Join(isdir, "tool"), 0o755)
	for _, d := range []string{first, second} {
		os.WriteFile(filepath.Join(d, "tool"), []byte("#!/bin/sh\n"), 0o755)
	}
	join := func(dirs ...string) string { return strings.Join(dirs, string(filepath.ListSeparator)) }
	tests := []struct {
		name, path string
		tries      int // files checked
	}{
		{"first match wins", join(empty, first, second), 2},
		{"not executable, a directory: passed over", join(noexec, isdir, second), 3},
		{"a directory named again is tried once", join(empty, empty, empty+"/", noexec, empty, first), 3},
		{"none", join(empty, noexec, empty), 2},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Setenv("PATH", tt.path)
			want, wantErr := exec.LookPath("tool")
			tries := 0
			got, err := lookPath("tool", tt.path, func(f string) error { tries++; return isExecutable(f) })
			if got != want || (err == nil) != (wantErr == nil) {
				t.Errorf("lookPath = %q, %v; exec.LookPath = %q, %v", got, err, want, wantErr)
			}
			if tries != tt.tries {
				t.Errorf("checked %d files, want %d", tries, tt.tries)
			}
		})
	}
	// A match in a relative directory is refused, as LookPath refuses it
	// (control: the same directory named absolutely is found).
	t.Chdir(base)
	if _, err := lookPath("tool", join("first"), isExecutable); !errors.Is(err, exec.ErrDot) {
		t.Errorf("relative directory: %v, want ErrDot", err)
	}
	if got, err := lookPath("tool", join(first), isExecutable); err != nil || got != filepath.Join(first, "tool") {
		t.Errorf("absolute directory: %q, %v", got, err)
	}
}
