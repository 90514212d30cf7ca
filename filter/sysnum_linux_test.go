//go:build linux && (amd64 || arm64)

package filter

import (
	"testing"
)

// TestSysnumMatchesXSys compares every entry of the generated table for the
// native architecture with golang.org/x/sys/unix's SYS_* constant of the
// same name (nativeSysnum is generated as unix.SYS_X for each name, so it
// is compiled against the x/sys that go.mod selects), and the same for the
// named constants. A stale zsysnum.go (x/sys upgraded, go generate not run)
// fails here.
func TestSysnumMatchesXSys(t *testing.T) {
	native, err := NativeArch()
	if err != nil || native != nativeArch {
		t.Fatalf("NativeArch() = %v, %v; this test binary is %v", native, err, nativeArch)
	}
	ai := archInfos[native]
	if len(ai.sysnum) != len(nativeSysnum) {
		t.Errorf("table has %d syscalls, x/sys %d", len(ai.sysnum), len(nativeSysnum))
	}
	for name, want := range nativeSysnum {
		got, ok := ai.sysnum.lookup(name)
		if !ok || got != want {
			t.Errorf("%s: table %d (present %v), x/sys %d", name, got, ok, want)
		}
	}
	if len(ai.consts) != len(nativeConst) {
		t.Errorf("table has %d constants, x/sys %d", len(ai.consts), len(nativeConst))
	}
	for name, want := range nativeConst {
		if got, ok := ai.consts.lookup(name); !ok || got != want {
			t.Errorf("%s: table %#x (present %v), x/sys %#x", name, got, ok, want)
		}
	}
	for name, pair := range commonConst {
		if pair[0] != pair[1] {
			t.Errorf("%s: generated %#x, x/sys %#x", name, pair[0], pair[1])
		}
	}
}
