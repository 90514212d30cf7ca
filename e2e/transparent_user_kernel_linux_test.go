package e2e

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/sandbox-run/sandbox-run/internal/sandboxtest"
)

// The /dev/net/tun an unprivileged caller gets in asCaller's mount
// namespace (the host's own is never touched).
const (
	tunOpen   = "open"   // a node of the TUN device, mode 0666, as udev's default rule makes it
	tunClosed = "closed" // a node of the TUN device, mode 0600, root's: the caller may not open it
	tunBroken = "broken" // /dev/null: it opens, but makes no device (the helper fails)
)

// asCaller runs sandbox-run as uid 65534, an unprivileged caller, from a
// root test: in a mount namespace of its own whose /dev/net/tun is as dev
// says and whose /etc/hosts is hosts (when not empty). The test host
// needs root to wire its namespace; the run under test does not have it.
func asCaller(t *testing.T, dev, hosts string, args ...string) result {
	t.Helper()
	sandboxtest.Root(t)
	for _, tool := range []string{"unshare", "setpriv", "mknod"} {
		if _, err := exec.LookPath(tool); err != nil {
			sandboxtest.Unavailable(t, tool+" (util-linux, coreutils)", "apt-get install util-linux coreutils")
		}
	}
	if _, err := os.Stat("/dev/net/tun"); err != nil {
		sandboxtest.Unavailable(t, "/dev/net/tun", "modprobe tun")
	}
	nodes := sandboxtest.WorkDir(t) // a tmpfs goes over it, in the namespace only
	home := sandboxtest.WorkDir(t)  // the caller's home, its own
	hostsFile := ""
	if hosts != "" {
		hostsFile = filepath.Join(sandboxtest.WorkDir(t), "hosts")
		if err := os.WriteFile(hostsFile, []byte("127.0.0.1 localhost\n"+hosts), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	script := `set -e; d=$1 dev=$2 hosts=$3 home=$4; shift 4
mount -t tmpfs -o mode=0755 sbx-tun "$d"
case $dev in
open) mknod -m 0666 "$d/tun" c 10 200; mount --bind "$d/tun" /dev/net/tun ;;
closed) mknod -m 0600 "$d/tun" c 10 200; mount --bind "$d/tun" /dev/net/tun ;;
broken) mount --bind /dev/null /dev/net/tun ;;
esac
[ -z "$hosts" ] || mount --bind "$hosts" /etc/hosts
exec setpriv --reuid 65534 --regid 65534 --clear-groups env HOME="$home" XDG_CACHE_HOME="$home/.cache" TMPDIR=/tmp "$@"`
	argv := append([]string{"-m", "sh", "-c", script, "sh", nodes, dev, hostsFile, home, bin}, args...)
	return runBin(t, "unshare", nil, "", argv...)
}

// transparentOf reads a report's egress_transparent.
func transparentOf(t *testing.T, path string) (on bool, reason string, notes []string) {
	t.Helper()
	var v struct {
		Transparent *struct {
			On     bool   `json:"transparent"`
			Reason string `json:"reason"`
		} `json:"egress_transparent"`
		Notes []string `json:"notes"`
	}
	b, _ := os.ReadFile(path)
	if err := json.Unmarshal(b, &v); err != nil || v.Transparent == nil {
		t.Fatalf("report %s: %v %s", path, err, b)
	}
	return v.Transparent.On, v.Transparent.Reason, v.Notes
}

// TestTransparentUnprivileged: an unprivileged caller's run reaches an
// allowed host:port with a client that has no proxy support, and not a
// port off the list. Controls: unconfined the service is reached; the
// same run where the caller may not open /dev/net/tun, or where the
// device cannot be made, does not reach it, exits 0, and names the loss
// in the report and its notes.
func TestTransparentUnprivileged(t *testing.T) {
	needBwrap(t)
	sandboxtest.Root(t) // the test host's namespace; the run drops to uid 65534
	h := sandboxtest.NewTestHost(t, 3)
	odd := sandboxtest.OddPort
	hp := fmt.Sprintf("%s:%d", h.Addr, odd)
	client := rawTCP(h.Addr.String(), odd)

	if r := unconfined(t, sandboxtest.WorkDir(t), client); !strings.Contains(r.stdout, sandboxtest.OddGreeting) {
		t.Fatalf("control: the odd-port service is unreachable unconfined (untested): %q %q", r.stdout, r.stderr)
	}
	run := func(dev, allow string) (result, string) {
		rep := filepath.Join(sandboxtest.WorkDir(t), "report.json")
		r := asCaller(t, dev, "", "run", "--workdir", sandboxtest.WorkDir(t), "--allow-host", allow, "--report", rep, "--", "sh", "-c", client)
		if r.code != 0 {
			t.Fatalf("run (%s): exit %d: %s", dev, r.code, r.stderr)
		}
		return r, rep
	}
	t.Run("allowed host:port reached", func(t *testing.T) {
		r, rep := run(tunOpen, hp)
		if !strings.Contains(r.stdout, sandboxtest.OddGreeting) {
			t.Fatalf("an allowed host:port was not reached without proxy variables: %q %q", r.stdout, r.stderr)
		}
		if on, why, _ := transparentOf(t, rep); !on {
			t.Errorf("report: transparent egress off (%s), want on", why)
		}
	})
	t.Run("port off the list refused", func(t *testing.T) {
		before, _ := h.OddCounts(t)
		r, _ := run(tunOpen, h.HostPort())
		if !strings.Contains(r.stdout, "CONNECT-FAILED") {
			t.Fatalf("a port not on the allow list was reached: %q", r.stdout)
		}
		if after, _ := h.OddCounts(t); after != before {
			t.Errorf("the service accepted %d connections", after-before)
		}
	})
	for _, c := range []struct{ dev, reason string }{
		{tunClosed, "/dev/net/tun is not open to uid 65534"},
		{tunBroken, "TUN device could not be made"},
	} {
		t.Run("control: lost where /dev/net/tun is "+c.dev, func(t *testing.T) {
			r, rep := run(c.dev, hp)
			if strings.Contains(r.stdout, sandboxtest.OddGreeting) || !strings.Contains(r.stdout, "CONNECT-FAILED") {
				t.Fatalf("reached without transparent egress: %q %q", r.stdout, r.stderr)
			}
			on, why, notes := transparentOf(t, rep)
			if on || !strings.Contains(why, c.reason) {
				t.Errorf("report: on %v, reason %q; want off with %q", on, why, c.reason)
			}
			if !slices.ContainsFunc(notes, func(n string) bool { return strings.Contains(n, "transparent egress lost: ") }) {
				t.Errorf("the notes do not name the loss: %q", notes)
			}
		})
	}
}

// listInterfaces is a script that prints the network interfaces of its
// namespace, one line "IF name" each, and changes nothing: the unconfined
// control runs it in the host's namespace.
const listInterfaces = `sed -n 's/^ *\([^:]*\):.*/IF \1/p' /proc/net/dev`

// changeInterfaces lists the interfaces, then tries to change them (lo
// down, an address on tun0) and prints CHANGED for each change that held.
// Never run it where a change would reach the host: only in a sandbox or
// a network namespace of the test's own.
const changeInterfaces = listInterfaces + `
ip link set lo down 2>/dev/null && echo CHANGED
ip addr add 10.9.9.9/32 dev tun0 2>/dev/null && echo CHANGED
true`

func ifaces(out string) []string {
	var l []string
	for _, line := range strings.Split(out, "\n") {
		if name, ok := strings.CutPrefix(line, "IF "); ok {
			l = append(l, name)
		}
	}
	slices.Sort(l)
	return l
}

// TestTransparentNetnsEmpty: the network namespace the command runs in
// holds lo and, with transparent egress, tun0, and nothing else, as
// bwrap's own holds lo alone; the command cannot change either. Controls:
// unconfined the listing alone (never the changes) shows the host's
// interfaces (more than lo);
// in a user and network namespace of the test's own, where it holds
// CAP_NET_ADMIN, it changes lo. Runs as root and unprivileged (where the
// report says whether this caller got the device).
func TestTransparentNetnsEmpty(t *testing.T) {
	needBwrap(t)
	if _, err := exec.LookPath("ip"); err != nil {
		sandboxtest.Unavailable(t, "ip (iproute2)", "apt-get install iproute2")
	}
	w := sandboxtest.WorkDir(t)
	if got := ifaces(unconfined(t, w, listInterfaces).stdout); len(got) < 2 {
		t.Fatalf("control: unconfined, the script lists %q, want the host's interfaces (untested)", got)
	}
	if out, err := exec.Command("unshare", "-Urn", "sh", "-c", changeInterfaces).Output(); err != nil || !strings.Contains(string(out), "CHANGED") {
		t.Fatalf("control: with CAP_NET_ADMIN in a namespace of its own the script changed nothing (untested): %v %q", err, out)
	}
	if r := sandboxed(t, w, changeInterfaces); !slices.Equal(ifaces(r.stdout), []string{"lo"}) || strings.Contains(r.stdout, "CHANGED") {
		t.Errorf("bwrap's own network namespace: %q", r.stdout)
	}
	rep := filepath.Join(sandboxtest.WorkDir(t), "report.json")
	r := sandboxed(t, w, changeInterfaces, "--allow-host", "example.com", "--report", rep)
	want := []string{"lo"}
	if on, _, _ := transparentOf(t, rep); on {
		want = []string{"lo", "tun0"}
	}
	if got := ifaces(r.stdout); !slices.Equal(got, want) {
		t.Errorf("with --allow-host the namespace holds %q, want %q", got, want)
	}
	if strings.Contains(r.stdout, "CHANGED") {
		t.Errorf("the command changed its network namespace: %q", r.stdout)
	}
}
