package mount

import "testing"

// Every kind prints as the bwrap option it is named after; an unknown
// one says so instead of borrowing a name.
func TestKindString(t *testing.T) {
	for k, want := range map[Kind]string{ROBind: "ro-bind", Bind: "bind", Symlink: "symlink", Proc: "proc",
		Dev: "dev", Tmpfs: "tmpfs", RemountRO: "remount-ro", Dir: "dir", Dir + 1: "Kind(8)", -1: "Kind(-1)"} {
		if got := k.String(); got != want {
			t.Errorf("Kind(%d).String() = %q, want %q", int(k), got, want)
		}
	}
}
