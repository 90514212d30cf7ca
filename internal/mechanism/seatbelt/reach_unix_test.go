//go:build darwin || linux

package seatbelt

import (
	"errors"
	"os"
	"strings"
	"testing"

	"github.com/sandbox-run/sandbox-run/internal/fault"
)

// fakeTree is a fake file system for reachableAs: path -> owner and mode.
// Nothing here touches the real one.
type fakeTree map[string]fileOwner

func (f fakeTree) stat(p string) (fileOwner, error) {
	if o, ok := f[p]; ok {
		return o, nil
	}
	return fileOwner{}, os.ErrNotExist
}

// The macOS root case of issue 22: the private TMPDIR under a launchd
// TMPDIR (/var/folders/xx/yy/T, 0700, root's) is not reachable for uid
// 65534 even when the private directory itself is chowned to it; under
// /private/tmp (1777) it is.
func TestReachableAs(t *testing.T) {
	const uid, gid = 65534, 65534
	tree := fakeTree{
		"/":                                {0o755, 0, 0},
		"/private":                         {0o755, 0, 0},
		"/private/var":                     {0o755, 0, 0},
		"/private/var/folders":             {0o755, 0, 0},
		"/private/var/folders/zz":          {0o755, 0, 0},
		"/private/var/folders/zz/yy":       {0o755, 0, 0},
		"/private/var/folders/zz/yy/T":     {0o700, 0, 0},
		"/private/var/folders/zz/yy/T/s-1": {0o700, uid, gid},
		"/private/tmp":                     {0o777, 0, 0},
		"/private/tmp/s-2":                 {0o700, uid, gid},
		"/private/tmp/roots":               {0o700, 0, 0},
		"/Users":                           {0o755, 0, 80},
		"/Users/alice":                     {0o750, 501, 20},
		"/Users/alice/job":                 {0o755, 501, 20},
		"/Users/shared":                    {0o755, 501, 20},
		"/Users/shared/job":                {0o775, 501, gid},
	}
	for _, tc := range []struct {
		path  string
		write bool
		want  string // "" for reachable, else a substring of the error
	}{
		{"/private/var/folders/zz/yy/T/s-1", true, "cannot search /private/var/folders/zz/yy/T"},
		{"/private/tmp/s-2", true, ""},
		{"/private/tmp/roots", true, "not writable for uid 65534"},
		{"/private/tmp/roots", false, ""},
		{"/Users/alice/job", false, "cannot search /Users/alice"},
		{"/Users/shared/job", true, ""},
		{"/nowhere/x", false, "cannot inspect /nowhere"},
	} {
		err := reachableAs(tc.path, uid, gid, tc.write, tree.stat)
		switch {
		case tc.want == "" && err != nil:
			t.Errorf("%s: %v, want reachable", tc.path, err)
		case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
			t.Errorf("%s: %v, want an error naming %q", tc.path, err, tc.want)
		case err != nil:
			var se *fault.Error
			if !errors.As(err, &se) || se.Fix == "" {
				t.Errorf("%s: %#v is not a SetupError with a fix", tc.path, err)
			}
		}
	}
}
