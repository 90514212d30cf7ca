package bwrap

import (
	"bytes"
	"encoding/binary"
	"errors"
	"os"
	"os/exec"
	"strings"
	"testing"
)

// thisBuildID is the Go build ID of the running test binary, as go tool
// buildid reads it, and the binary's bytes.
func thisBuildID(t *testing.T) (string, []byte) {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command("go", "tool", "buildid", exe).Output()
	if err != nil {
		t.Fatalf("go tool buildid %s: %v", exe, err)
	}
	b, err := os.ReadFile(exe)
	if err != nil {
		t.Fatal(err)
	}
	return strings.TrimSpace(string(out)), b
}

func TestGoBuildIDAsGoToolReadsIt(t *testing.T) {
	want, b := thisBuildID(t)
	if strings.Count(want, "/") < 1 {
		t.Fatalf("go tool buildid printed %q, not a build ID", want)
	}
	got, err := goBuildID(bytes.NewReader(b))
	if err != nil || got != want {
		t.Fatalf("goBuildID = %q, %v; go tool buildid says %q", got, err, want)
	}
}

func TestGoBuildIDRefuses(t *testing.T) {
	_, exe := thisBuildID(t)
	if binary.LittleEndian.Uint16(exe[18:]) == 0 {
		t.Fatal("not an ELF executable")
	}
	patched := func(off int, v ...byte) []byte {
		b := bytes.Clone(exe[:64<<10])
		copy(b[off:], v)
		return b
	}
	cBinary, err := os.ReadFile("/bin/true")
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		b    []byte
	}{
		{"empty", nil},
		{"a script", []byte("#!/bin/sh\nexit 0\n")},
		{"the ELF header cut short", exe[:40]},
		{"the program headers cut off", exe[:64]},
		{"no program headers", patched(56, 0, 0)},
		{"a program header too small", patched(54, 8, 0)},
		{"an unknown class", patched(4, 9)},
		{"an unknown byte order", patched(5, 9)},
		{"a C binary (notes, none Go's)", cBinary},
	} {
		if id, err := goBuildID(bytes.NewReader(tc.b)); !errors.Is(err, errNoBuildID) {
			t.Errorf("%s: goBuildID = %q, %v; want errNoBuildID", tc.name, id, err)
		}
	}
}

// TestGoBuildIDOnDamage damages each byte of the region goBuildID reads
// (header, program headers, note) in turn, and cuts the file at each
// length through it: a cut file has no ID, a damaged one an ID or
// errNoBuildID (damage to the ID's bytes or its length reads as another
// ID, which matches no stamp); never a panic or another error.
func TestGoBuildIDOnDamage(t *testing.T) {
	want, exe := thisBuildID(t)
	end := bytes.Index(exe[:64<<10], []byte(want))
	if end < 0 {
		t.Fatal("the build ID is not in the first 64 KiB")
	}
	end += len(want)
	for n := 0; n < end; n++ {
		if id, err := goBuildID(bytes.NewReader(exe[:n])); err == nil {
			t.Fatalf("cut at %d bytes: goBuildID = %q, want an error", n, id)
		}
	}
	b := bytes.Clone(exe[:end+4096])
	for i := 0; i < end; i++ {
		for _, x := range []byte{0xff, 0x80, 0x01} {
			orig := b[i]
			b[i] ^= x
			id, err := goBuildID(bytes.NewReader(b))
			b[i] = orig
			if err != nil && !errors.Is(err, errNoBuildID) {
				t.Fatalf("byte %d ^ %#x: error %v is not errNoBuildID", i, x, err)
			}
			if err == nil && id == "" {
				t.Fatalf("byte %d ^ %#x: goBuildID = \"\" without an error", i, x)
			}
		}
	}
}
