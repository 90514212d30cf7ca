package proxy

import (
	"net/netip"
	"os/exec"
	"runtime"
	"slices"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/sandbox-run/sandbox-run/internal/sandboxtest"
)

// TestOwnWatchSeesChanges: while held, the own-address watch lists the
// interfaces once and again only after a change, and a change made before
// a call is seen by that call: an address added to an interface is
// refused as own-address by the next judgement, one removed is no longer.
// It runs in a network namespace of its own (on a locked thread), where it
// adds and removes the address. Controls: the address really was added
// (a listing without the watch shows it), and the watch really caches
// (repeated calls without a change list once), so the test could not
// pass by listing at every call.
func TestOwnWatchSeesChanges(t *testing.T) {
	sandboxtest.Root(t)
	if _, err := exec.LookPath("ip"); err != nil {
		sandboxtest.Unavailable(t, "ip (iproute2)", "apt-get install iproute2")
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		runtime.LockOSThread() // never unlocked: the thread ends with the goroutine
		if err := unix.Unshare(unix.CLONE_NEWNET); err != nil {
			t.Errorf("unshare a network namespace: %v", err)
			return
		}
		ownWatchInNS(t)
	}()
	<-done
}

// ownWatchInNS is the body of TestOwnWatchSeesChanges, on the locked
// thread in the new namespace. It may not call t.Fatal (not the test
// goroutine).
func ownWatchInNS(t *testing.T) {
	const ip = "10.99.0.9"
	addr := netip.MustParseAddr(ip)
	ipCmd := func(args ...string) {
		if out, err := exec.Command("ip", args...).CombinedOutput(); err != nil {
			t.Errorf("ip %v: %v: %s", args, err, out)
		}
	}
	p, err := New(Config{Allow: []string{"10.0.0.0/8"}})
	if err != nil {
		t.Error(err)
		return
	}
	lists := 0
	p.own.list = func() ([]netip.Addr, error) { lists++; return interfaceAddrs() }
	release := p.own.hold()
	defer release()
	if p.own.sock == nil {
		t.Fatal("the watch has no event socket: it would list at every call")
	}
	tgt := mustTarget(t, ip, 80)
	judge := func() string {
		if r := p.judge(tgt, addr); r != nil {
			return r.reason
		}
		return ""
	}
	if got := judge(); got != "" {
		t.Errorf("before the address exists: judge = %q, want allowed", got)
		return
	}
	for range 5 {
		judge()
	}
	if lists != 1 {
		t.Errorf("6 judgements without a change listed %d times, want 1 (the watch does not cache)", lists)
		return
	}

	ipCmd("link", "set", "lo", "up")
	ipCmd("addr", "add", ip+"/32", "dev", "lo")
	if as, err := interfaceAddrs(); err != nil || !slices.Contains(as, addr) {
		t.Errorf("control: %s not listed after ip addr add: %v %v", ip, as, err)
		return
	}
	if got := judge(); got != reasonOwnAddr {
		t.Errorf("right after ip addr add: judge = %q, want %q", got, reasonOwnAddr)
	}
	ipCmd("addr", "del", ip+"/32", "dev", "lo")
	if got := judge(); got != "" {
		t.Errorf("right after ip addr del: judge = %q, want allowed", got)
	}
	before := lists
	judge()
	if lists != before {
		t.Errorf("a judgement after no change listed again (%d, %d)", before, lists)
	}

	release()
	if p.own.sock != nil {
		t.Error("released: the event socket is still open")
	}
	before = lists
	judge()
	judge()
	if lists != before+2 {
		t.Errorf("released: 2 judgements listed %d times, want 2 (listing at every call)", lists-before)
	}
	t.Logf("listed %d times in all", lists)
}
