package sandbox

import (
	"strings"
	"testing"
)

func TestOwnerFix(t *testing.T) {
	for _, c := range []struct {
		owner, group int
		want         string
	}{
		{1000, 1000, "pass --user 1000:1000 (the directory's owner), or chown -R 65534:65534 /w"},
		{0, 0, "pass --map-owner (the command still runs as uid 65534;"},
		{-1, -1, "chown -R 65534:65534 /w, or pass --user UID[:GID] of the directory's owner"},
	} {
		if got := ownerFix("/w", 65534, 65534, c.owner, c.group); !strings.HasPrefix(got, c.want) {
			t.Errorf("owner %d: %q, want it to start %q", c.owner, got, c.want)
		}
	}
}
