package bwrap

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"syscall"

	"github.com/sandbox-run/sandbox-run/pathguard"
)

// Detector detects bwrap binaries, remembering what it learnt in CacheDir
// so that a launch need not run bwrap twice more just to read its version
// and options.
//
// An entry is keyed by the binary's path and identity (device, inode, size,
// modification and change times): replacing or upgrading bwrap, even in
// place, misses the cache. The entry holds bwrap's own --version and --help
// output and is parsed again on every use, so a damaged entry is detected
// afresh. Anyone who can write CacheDir can make sandbox-run believe a
// feature is missing (a weaker but reported sandbox) or present (bwrap then
// refuses the unknown option and the run fails closed), so CacheDir is
// opened with pathguard.OpenPrivateDir: no link is followed on its way; a
// CacheDir not owned by the effective uid, or writable by group or others,
// is set aside and made again; an entry that is not a regular file of this
// uid closed to others is ignored and written anew. sandbox-run refuses
// any writable directory that is, holds or lies in CacheDir.
type Detector struct {
	// CacheDir is where entries live; empty disables the cache.
	CacheDir string
	// Resolver, when set, is the memo the caller looked path up through
	// (a plan's): the identity is read from it instead of a stat of its
	// own. It must have walked path as it is to be run.
	Resolver *pathguard.Resolver
}

type cacheEntry struct {
	Version string `json:"version"`
	Help    string `json:"help"`
}

// Detect returns what the bwrap at path can do, from the cache when the
// same binary was seen before. A cache that cannot be opened safely (a
// link among CacheDir's parents) costs a probe, never the run.
func (d Detector) Detect(ctx context.Context, path string) (*Info, error) {
	key, ok := identity(d.Resolver, path)
	if !ok || d.CacheDir == "" {
		return Detect(ctx, path)
	}
	dir, err := pathguard.OpenPrivateDir(d.CacheDir)
	if err != nil {
		return Detect(ctx, path)
	}
	defer dir.Close()
	name := "bwrap-" + key + ".json"
	if b, err := dir.ReadFile(name); err == nil {
		var e cacheEntry
		if json.Unmarshal(b, &e) == nil {
			if info, err := Parse(path, e.Version, e.Help); err == nil {
				return info, nil
			}
		}
	}
	vo, ho, err := probe(ctx, path)
	if err != nil {
		return nil, err
	}
	info, err := Parse(path, vo, ho)
	if err != nil {
		return nil, err
	}
	// Written whole and renamed over an entry that was ignored; a failure
	// only costs the next launch a probe.
	if b, err := json.Marshal(cacheEntry{Version: vo, Help: ho}); err == nil {
		dir.WriteFile(name, b)
	}
	return info, nil
}

// identity is the cache key of the bwrap at path: a digest of its path
// and stat(2) identity, read through rv when set.
func identity(rv *pathguard.Resolver, path string) (string, bool) {
	var st syscall.Stat_t
	if rv == nil {
		if err := syscall.Stat(path, &st); err != nil {
			return "", false
		}
	} else {
		fi, err := rv.Stat(path)
		if err != nil {
			return "", false
		}
		sp, ok := fi.Sys().(*syscall.Stat_t)
		if !ok {
			return "", false
		}
		st = *sp
	}
	h := sha256.Sum256([]byte(fmt.Sprintf("%s|%d|%d|%d|%d.%d|%d.%d", path, st.Dev, st.Ino, st.Size,
		st.Mtim.Sec, st.Mtim.Nsec, st.Ctim.Sec, st.Ctim.Nsec)))
	return hex.EncodeToString(h[:12]), true
}
