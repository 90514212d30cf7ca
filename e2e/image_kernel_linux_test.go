package e2e

// run --image and mcp --image (issue 39): an image built here with podman
// import (static busybox and the mcptest server, no registry), run under
// gVisor with the run's own proxy, report and relay.

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sandbox-run/sandbox-run/internal/mcptest"
	"github.com/sandbox-run/sandbox-run/internal/sandboxtest"
)

// imageEnv is the environment of an image run: a cache of the test's own
// (the unpacked trees), never in the workdir.
func imageEnv(t *testing.T) []string {
	c := t.TempDir()
	os.Chmod(c, 0o700)
	return []string{"XDG_CACHE_HOME=" + c}
}

// staticServer builds the mcptest server statically (the image has no
// libc) and returns its path.
func staticServer(t *testing.T) string {
	t.Helper()
	out := filepath.Join(t.TempDir(), "mcp-server")
	c := exec.Command("go", "build", "-o", out, "../internal/mcptest/server")
	c.Env = append(os.Environ(), "CGO_ENABLED=0")
	if b, err := c.CombinedOutput(); err != nil {
		t.Fatalf("building the mcptest server: %v\n%s", err, b)
	}
	return out
}

// TestImageRun: the command runs in the image's tree (its marker file is
// there, the host's /usr/bin is not), writes the workdir, sees gVisor's
// kernel, and the report names tier 2, gvisor and the image's digest.
// Controls: the host's tree has /usr/bin and no marker, and its kernel log
// does not name gVisor.
func TestImageRun(t *testing.T) {
	sandboxtest.Runsc(t)
	img := sandboxtest.BusyboxImage(t, nil)
	w := sandboxtest.WorkDir(t)
	rep := filepath.Join(t.TempDir(), "report.json")
	script := "cat /etc/image-marker; test -e /usr/bin/env && echo host-usr; dmesg | head -1; uname -a; echo made > out.txt"
	r := runEnv(t, imageEnv(t), "", "run", "--workdir", w, "--image", img.Ref, "--report", rep, "--", "sh", "-c", script)
	if r.code != 0 || !strings.Contains(r.stdout, "busybox test image") || strings.Contains(r.stdout, "host-usr") || !strings.Contains(r.stdout, "gVisor") {
		t.Fatalf("exit %d, stdout %q, stderr %q", r.code, r.stdout, r.stderr)
	}
	if b, err := os.ReadFile(filepath.Join(w, "out.txt")); err != nil || string(b) != "made\n" {
		t.Errorf("the workdir was not written: %q %v", b, err)
	}
	var report struct {
		Tier      int    `json:"tier"`
		Mechanism string `json:"mechanism"`
		Image     struct {
			Reference, Digest, ID string
		} `json:"image"`
		Protections []struct {
			Name     string `json:"name"`
			Verified *bool  `json:"verified"`
		} `json:"protections"`
	}
	b, err := os.ReadFile(rep)
	if err == nil {
		err = json.Unmarshal(b, &report)
	}
	if err != nil {
		t.Fatal(err)
	}
	if report.Tier != 2 || report.Mechanism != "gvisor" || report.Image.Reference != img.Ref || report.Image.Digest != img.Digest || report.Image.ID != img.ID {
		t.Errorf("report: tier %d mechanism %q image %+v; want %+v", report.Tier, report.Mechanism, report.Image, img)
	}
	for _, p := range report.Protections {
		if p.Name == "kernel:gvisor" && (p.Verified == nil || !*p.Verified) {
			t.Errorf("kernel:gvisor not verified from inside: %s", b)
		}
	}
	ctl := unconfined(t, w, "test -e /usr/bin/env && echo host-usr; cat /etc/image-marker 2>/dev/null; dmesg 2>/dev/null | head -1")
	if !strings.Contains(ctl.stdout, "host-usr") || strings.Contains(ctl.stdout, "busybox test image") || strings.Contains(ctl.stdout, "gVisor") {
		t.Errorf("control: on the host %q", ctl.stdout)
	}
}

// TestImageEgress: from the image, a test host in a network namespace is
// reached through sandbox-run's proxy when --allow-host names it, refused
// (403) when the list has no entry for it, not reached without a list,
// reached directly (transparent egress) with the entry and not without
// it. Control: the
// same direct request from the host reaches it. (busybox nc: busybox wget
// crashes under Debian 12's gVisor, image or not.)
func TestImageEgress(t *testing.T) {
	sandboxtest.Root(t) // the test host lives in a network namespace only root can wire up
	sandboxtest.Runsc(t)
	h := sandboxtest.NewTestHost(t, 0)
	img := sandboxtest.BusyboxImage(t, nil)
	w := sandboxtest.WorkDir(t)
	// The request's stdin stays open a while: nc ends the connection when
	// its input ends.
	req := fmt.Sprintf(`(printf 'GET http://%s/ok HTTP/1.1\r\nHost: %s\r\nConnection: close\r\n\r\n'; sleep 3)`, h.HostPort(), h.HostPort())
	viaProxy := req + ` | nc -w 5 "$(echo ${HTTP_PROXY#http://} | cut -d: -f1)" "${HTTP_PROXY##*:}"`
	direct := fmt.Sprintf(`(printf 'GET /ok HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n'; sleep 3) | nc -w 5 %s %d`, h.Addr, h.Port)
	get := func(script string, extra ...string) result {
		args := append([]string{"run", "--workdir", w, "--image", img.Ref}, extra...)
		return runEnv(t, imageEnv(t), "", append(args, "--", "sh", "-c", script)...)
	}
	allow := "--allow-host=" + h.HostPort()
	if r := get(viaProxy, allow); !strings.Contains(r.stdout, "ok from test host") {
		t.Fatalf("allowed, through the proxy: exit %d, %q %q", r.code, r.stdout, r.stderr)
	}
	if r := get(viaProxy, "--allow-host=example.com"); strings.Contains(r.stdout, "ok from test host") || !strings.Contains(r.stdout, " 403") {
		t.Errorf("no entry for it, through the proxy: %q, want 403", r.stdout)
	}
	if r := get(viaProxy); strings.Contains(r.stdout, "ok from test host") {
		t.Errorf("no allow-list at all: %q: reached", r.stdout)
	}
	// Direct, with no proxy: transparent egress (init's TUN device in
	// gVisor's netstack) reaches the allowed host, and nothing else.
	if r := get(direct, allow); !strings.Contains(r.stdout, "ok from test host") {
		t.Errorf("allowed, direct: %q %q: not reached through transparent egress", r.stdout, r.stderr)
	}
	if r := get(direct, "--allow-host=example.com"); strings.Contains(r.stdout, "ok from test host") {
		t.Errorf("no entry for it, direct: %q: reached", r.stdout)
	}
	ctl, err := exec.Command("/bin/busybox", "sh", "-c", direct).CombinedOutput()
	if err != nil || !strings.Contains(string(ctl), "ok from test host") {
		t.Fatalf("control: the host does not reach the test host directly (untested): %v %q", err, ctl)
	}
}

// TestImagePinned: a pin on the stored digest runs; a different digest,
// an absent image and a runtime other than runsc are refused with one
// line and exit 125, and nothing is pulled.
func TestImagePinned(t *testing.T) {
	sandboxtest.Runsc(t)
	img := sandboxtest.BusyboxImage(t, nil)
	w := sandboxtest.WorkDir(t)
	env := imageEnv(t)
	name, _, _ := strings.Cut(img.Ref, "@")
	if r := runEnv(t, env, "", "run", "--workdir", w, "--image", name+"@"+img.Digest, "--", "true"); r.code != 0 {
		t.Fatalf("control: the right digest: exit %d %q", r.code, r.stderr)
	}
	wrong := "sha256:" + strings.Repeat("0", 64)
	r := runEnv(t, env, "", "run", "--workdir", w, "--image", name+"@"+wrong, "--", "true")
	oneLine(t, r, "not the pinned digest", img.Digest)
	absent := fmt.Sprintf("localhost/sandbox-run-absent-%d:1", os.Getpid())
	r = runEnv(t, env, "", "run", "--workdir", w, "--image", absent, "--", "true")
	oneLine(t, r, "podman pull "+absent, "--pull")
	r = runEnv(t, env, "", "run", "--workdir", w, "--image", img.Ref, "--sandbox", "landlock", "--", "true")
	oneLine(t, r, "only under gVisor", "--sandbox bwrap")
	r = runEnv(t, env, "", "run", "--workdir", w, "--image", img.Ref, "--image-runtime", "runc", "--", "true")
	oneLine(t, r, "--image-runtime runc")
	if out, _ := exec.Command("podman", "image", "exists", absent).CombinedOutput(); len(out) > 0 {
		t.Errorf("podman image exists %s: %s", absent, out)
	}
	if exec.Command("podman", "image", "exists", absent).Run() == nil {
		t.Errorf("%s was pulled", absent)
	}
}

// TestImageMCP: mcp --image relays the image's MCP server (the mcptest
// hostile server, built static into the image): an allowed tool call is
// answered, a call of the denied write_file is refused and its file never
// appears. Control: through run --image (nothing relayed) the same call
// writes the file.
func TestImageMCP(t *testing.T) {
	sandboxtest.Runsc(t)
	img := sandboxtest.BusyboxImage(t, map[string]string{"/usr/bin/mcp-server": staticServer(t)})
	w := sandboxtest.WorkDir(t)
	c := t.TempDir()
	os.Chmod(c, 0o700)
	t.Setenv("XDG_CACHE_HOME", c)
	call := func(m *rawMCP, id int, path string) rpcMsg {
		m.send(fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":"write_file","arguments":{"path":%q,"content":"x"}}}`, id, path))
		return m.reply(fmt.Sprint(id), nil)
	}
	ctl := startRaw(t, "run", "--workdir", w, "--image", img.Ref, "--", "mcp-server", mcptest.HostileArg)
	ctl.initialize(`{}`)
	call(ctl, 1, filepath.Join(w, "control"))
	if _, err := os.Stat(filepath.Join(w, "control")); err != nil {
		t.Fatalf("control: write_file did not write through run --image (untested): %v; stderr %s", err, ctl.stderr)
	}
	m := startRaw(t, "mcp", "--workdir", w, "--image", img.Ref, "--deny-tool", "write_file", "--", "mcp-server", mcptest.HostileArg)
	m.initialize(`{}`)
	m.send(`{"jsonrpc":"2.0","id":"l","method":"tools/list"}`)
	if r := m.reply(`"l"`, nil); r.Error != nil || !strings.Contains(string(r.Result), "echo") {
		t.Errorf("tools/list through the relay: %s", r.line)
	}
	if r := call(m, 2, filepath.Join(w, "relayed")); r.Error == nil {
		t.Errorf("the denied tool was answered: %s", r.line)
	}
	if _, err := os.Stat(filepath.Join(w, "relayed")); err == nil {
		t.Errorf("the denied tool ran through mcp --image")
	}
}
