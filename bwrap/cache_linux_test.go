package bwrap

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sandbox-run/sandbox-run/pathguard"
)

// fakeBwrap writes a script that answers --version and --help like bwrap
// 0.8.0 and counts its calls in dir/calls.
func fakeBwrap(t *testing.T, dir string) (path, calls string) {
	t.Helper()
	help, err := filepath.Abs("testdata/help-0.8.0-debian.txt")
	if err != nil {
		t.Fatal(err)
	}
	calls = filepath.Join(dir, "calls")
	path = filepath.Join(dir, "bwrap")
	script := "#!/bin/sh\necho x >> " + calls + "\ncase $1 in --version) echo 'bubblewrap 0.8.0';; --help) cat " + help + ";; esac\n"
	if err := os.WriteFile(path, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	return path, calls
}

func probes(t *testing.T, calls string) int {
	b, _ := os.ReadFile(calls)
	return strings.Count(string(b), "x")
}

// A cache entry is used only while it and its directory are this user's
// and closed to others; otherwise it is ignored and written anew.
func TestDetectorCacheTrust(t *testing.T) {
	tests := []struct {
		name   string
		forge  func(t *testing.T, cache, entry string)
		reused bool
	}{
		{"intact", func(*testing.T, string, string) {}, true},
		{"entry writable by others", func(t *testing.T, _, entry string) { chmod(t, entry, 0o666) }, false},
		{"entry is a link", func(t *testing.T, _, entry string) {
			other := entry + ".real"
			os.Rename(entry, other)
			if err := os.Symlink(other, entry); err != nil {
				t.Fatal(err)
			}
		}, false},
		{"dir writable by others", func(t *testing.T, cache, _ string) { chmod(t, cache, 0o777) }, false},
		{"dir of another owner", func(t *testing.T, cache, _ string) {
			if os.Geteuid() != 0 {
				t.Skip("needs root to give the cache to another uid")
			}
			if err := os.Chown(cache, 65534, 65534); err != nil {
				t.Fatal(err)
			}
		}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			path, calls := fakeBwrap(t, dir)
			cache := filepath.Join(dir, "cache", "sandbox-run")
			d := Detector{CacheDir: cache}
			if _, err := d.Detect(context.Background(), path); err != nil {
				t.Fatal(err)
			}
			entries, _ := filepath.Glob(filepath.Join(cache, "bwrap-*.json"))
			if len(entries) != 1 || probes(t, calls) != 2 {
				t.Fatalf("first detect: entries %v, %d probes; want one entry, 2 probes", entries, probes(t, calls))
			}
			tt.forge(t, cache, entries[0])
			if _, err := d.Detect(context.Background(), path); err != nil {
				t.Fatal(err)
			}
			if reused := probes(t, calls) == 2; reused != tt.reused {
				t.Errorf("entry reused %v, want %v (%d probes)", reused, tt.reused, probes(t, calls))
			}
			// Rebuilt: the next launch uses the entry written anew.
			if _, err := d.Detect(context.Background(), path); err != nil {
				t.Fatal(err)
			}
			if n := probes(t, calls); n > 4 {
				t.Errorf("%d probes: the cache was not rebuilt", n)
			}
			fi, err := os.Lstat(cache)
			if err != nil || !fi.IsDir() || fi.Mode().Perm()&0o022 != 0 {
				t.Errorf("cache dir after rebuild: %v %v", fi, err)
			}
		})
	}
}

func chmod(t *testing.T, p string, m os.FileMode) {
	t.Helper()
	if err := os.Chmod(p, m); err != nil {
		t.Fatal(err)
	}
}

// Through a Resolver that already walked the binary, Detect keys its
// cache as a stat of its own does (an entry written without one is used
// with one, and no probe runs) and looks nothing up again; replacing the
// binary still misses the cache for a Resolver that walks it afresh.
func TestDetectorResolverIdentity(t *testing.T) {
	dir := t.TempDir()
	path, calls := fakeBwrap(t, dir)
	cache := filepath.Join(dir, "cache")
	if _, err := (Detector{CacheDir: cache}).Detect(context.Background(), path); err != nil {
		t.Fatal(err)
	}
	if n := probes(t, calls); n != 2 {
		t.Fatalf("first Detect: %d probes, want 2 (--version, --help)", n)
	}
	rv := pathguard.NewResolver()
	if _, err := rv.Resolve(path); err != nil {
		t.Fatal(err)
	}
	before := rv.Calls()
	if _, err := (Detector{CacheDir: cache, Resolver: rv}).Detect(context.Background(), path); err != nil {
		t.Fatal(err)
	}
	if n := probes(t, calls); n != 2 {
		t.Errorf("Detect through the Resolver probed again (%d probes): its key differs from stat's", n)
	}
	if got := rv.Calls() - before; got != 0 {
		t.Errorf("Detect looked the walked binary up %d more times, want 0", got)
	}
	// Control: a new binary in its place misses the cache.
	os.Remove(path)
	fakeBwrap(t, dir)
	if _, err := (Detector{CacheDir: cache, Resolver: pathguard.NewResolver()}).Detect(context.Background(), path); err != nil {
		t.Fatal(err)
	}
	if n := probes(t, calls); n != 4 {
		t.Errorf("a replaced binary: %d probes in all, want 4 (the cache missed)", n)
	}
}
