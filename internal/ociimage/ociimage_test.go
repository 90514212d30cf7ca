package ociimage

import (
	"archive/tar"
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestParseRef(t *testing.T) {
	d := "sha256:" + strings.Repeat("ab", 32)
	for _, c := range []struct {
		in     string
		want   Ref
		refuse bool
	}{
		{in: "localhost/tool:1", want: Ref{Name: "localhost/tool:1"}},
		{in: "docker.io/library/alpine@" + d, want: Ref{Name: "docker.io/library/alpine", Digest: d}},
		{in: "tool:1@" + d, want: Ref{Name: "tool:1", Digest: d}},
		{in: "", refuse: true},
		{in: "--root=/x", refuse: true},
		{in: "a b", refuse: true},
		{in: "a\x00b", refuse: true},
		{in: "@" + d, refuse: true},
		{in: "tool@sha256:abc", refuse: true},
		{in: "tool@sha512:" + strings.Repeat("ab", 32), refuse: true},
		{in: "tool@sha256:" + strings.Repeat("AB", 32), refuse: true},
	} {
		got, err := ParseRef(c.in)
		if c.refuse {
			var e *Error
			if !errors.As(err, &e) {
				t.Errorf("ParseRef(%q) = %+v, %v; want a refusal", c.in, got, err)
			}
			continue
		}
		if err != nil || got != c.want || got.String() != c.in {
			t.Errorf("ParseRef(%q) = %+v (%q), %v; want %+v", c.in, got, got.String(), err, c.want)
		}
	}
}

func TestMatches(t *testing.T) {
	id := strings.Repeat("1", 64)
	man, repo, other := "sha256:"+strings.Repeat("2", 64), "sha256:"+strings.Repeat("3", 64), "sha256:"+strings.Repeat("4", 64)
	i := Info{ID: id, Digest: man, RepoDigests: []string{"docker.io/x@" + repo}}
	for d, want := range map[string]bool{man: true, repo: true, "sha256:" + id: true, other: false, "": false} {
		if got := i.Matches(d); got != want {
			t.Errorf("Matches(%q) = %v, want %v", d, got, want)
		}
	}
}

func TestParseInspect(t *testing.T) {
	id := strings.Repeat("a", 64)
	got, err := parseInspect([]byte(`[{"Id":"` + id + `","Digest":"sha256:` + id + `","RepoDigests":[],"Config":{"Env":["PATH=/bin"]}}]`))
	if err != nil || got.ID != id || len(got.Env) != 1 {
		t.Errorf("parseInspect: %+v, %v", got, err)
	}
	for _, bad := range []string{`[]`, `[{"Id":"short"}]`, `{}`, `[{"Id":"` + id + `"},{"Id":"` + id + `"}]`} {
		if _, err := parseInspect([]byte(bad)); err == nil {
			t.Errorf("parseInspect(%s): no error", bad)
		}
	}
}

type entry struct {
	name, link string
	typ        byte
	mode       int64
	body       string
}

func tarOf(t *testing.T, es []entry) *bytes.Buffer {
	var b bytes.Buffer
	tw := tar.NewWriter(&b)
	for _, e := range es {
		h := &tar.Header{Name: e.name, Linkname: e.link, Typeflag: e.typ, Mode: e.mode, Size: int64(len(e.body))}
		if err := tw.WriteHeader(h); err != nil {
			t.Fatal(err)
		}
		tw.Write([]byte(e.body))
	}
	tw.Close()
	return &b
}

// TestExtract: a tree is unpacked with its links, modes (set-uid dropped,
// a read-only directory still filled) and hard links; devices skipped.
func TestExtract(t *testing.T) {
	dir := t.TempDir()
	err := extract(tarOf(t, []entry{
		{name: "./", typ: tar.TypeDir, mode: 0o755},
		{name: "./ro/", typ: tar.TypeDir, mode: 0o555},
		{name: "./ro/f", typ: tar.TypeReg, mode: 0o4755, body: "x"},
		{name: "./bin", typ: tar.TypeSymlink, link: "usr/bin"},
		{name: "./abs", typ: tar.TypeSymlink, link: "/etc/passwd"},
		{name: "./ro/h", typ: tar.TypeLink, link: "./ro/f"},
		{name: "./null", typ: tar.TypeChar},
	}), dir, false)
	if err != nil {
		t.Fatal(err)
	}
	fi, err := os.Stat(filepath.Join(dir, "ro/f"))
	if err != nil || fi.Mode().Perm() != 0o755 || fi.Mode()&os.ModeSetuid != 0 {
		t.Errorf("ro/f: %v %v", fi, err)
	}
	if fi, _ := os.Stat(filepath.Join(dir, "ro")); fi == nil || fi.Mode().Perm() != 0o555 {
		t.Errorf("ro: %v", fi)
	}
	if l, _ := os.Readlink(filepath.Join(dir, "abs")); l != "/etc/passwd" {
		t.Errorf("abs -> %q", l)
	}
	if b, _ := os.ReadFile(filepath.Join(dir, "ro/h")); string(b) != "x" {
		t.Errorf("hard link: %q", b)
	}
	if _, err := os.Lstat(filepath.Join(dir, "null")); err == nil {
		t.Error("a device node was made")
	}
	os.Chmod(filepath.Join(dir, "ro"), 0o755) // t.TempDir's cleanup
}

// TestExtractStaysInside: names and links that lead out of the root are
// refused, and nothing is written outside it.
func TestExtractStaysInside(t *testing.T) {
	for name, es := range map[string][]entry{
		"dotdot":        {{name: "../escape", typ: tar.TypeReg, mode: 0o644, body: "x"}},
		"through link":  {{name: "l", typ: tar.TypeSymlink, link: ".."}, {name: "l/escape", typ: tar.TypeReg, mode: 0o644, body: "x"}},
		"absolute link": {{name: "l", typ: tar.TypeSymlink, link: "/tmp"}, {name: "l/escape", typ: tar.TypeReg, mode: 0o644, body: "x"}},
		"hard link out": {{name: "h", typ: tar.TypeLink, link: "../outside"}},
	} {
		parent := t.TempDir()
		dir := filepath.Join(parent, "root")
		os.Mkdir(dir, 0o755)
		os.WriteFile(filepath.Join(parent, "outside"), []byte("o"), 0o644)
		if err := extract(tarOf(t, es), dir, false); err == nil {
			t.Errorf("%s: no error", name)
		}
		if _, err := os.Stat(filepath.Join(parent, "escape")); err == nil {
			t.Errorf("%s: a file was written outside the root", name)
		}
	}
}
