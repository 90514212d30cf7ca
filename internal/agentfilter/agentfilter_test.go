package agentfilter

import (
	"context"
	"encoding/binary"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sandbox-run/sandbox-run/internal/refusals"
	"github.com/sandbox-run/sandbox-run/internal/sandboxtest"
)

// agentFixture is a real ssh-agent holding one key, and the filter in
// front of it.
type agentFixture struct {
	dir, raw, filtered, key string
	audit                   *sandboxtest.SyncBuffer
	refused                 *refusals.Collector
}

func tool(t *testing.T, name string) string {
	p, err := exec.LookPath(name)
	if err != nil {
		sandboxtest.Unavailable(t, name, "install openssh-client (scripts/install-deps.sh)")
	}
	return p
}

func newAgent(t *testing.T) *agentFixture {
	t.Helper()
	for _, n := range []string{"ssh-agent", "ssh-add", "ssh-keygen"} {
		tool(t, n)
	}
	dir, err := os.MkdirTemp("", "srpag") // short: sun_path is 108 bytes
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	a := &agentFixture{dir: dir, raw: filepath.Join(dir, "raw.sock"), filtered: filepath.Join(dir, "f.sock"),
		key: filepath.Join(dir, "id"), audit: &sandboxtest.SyncBuffer{}, refused: refusals.New(nil)}
	ctx, cancel := context.WithCancel(context.Background())
	agent := exec.CommandContext(ctx, "ssh-agent", "-D", "-a", a.raw)
	if err := agent.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cancel(); _ = agent.Wait() })
	run(t, "", "ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", a.key)
	for i := 0; ; i++ {
		if _, err := os.Stat(a.raw); err == nil {
			break
		}
		if i == 100 {
			t.Fatal("ssh-agent did not make its socket in 5s")
		}
		time.Sleep(50 * time.Millisecond)
	}
	run(t, a.raw, "ssh-add", "-q", a.key)
	ln, err := net.Listen("unix", a.filtered)
	if err != nil {
		t.Fatal(err)
	}
	f := &Filter{Agent: a.raw, Audit: a.audit, Refusals: a.refused, RunID: "r1"}
	errc := make(chan error, 1)
	go func() { errc <- f.Serve(ctx, ln) }()
	t.Cleanup(func() {
		cancel()
		if err := <-errc; err != nil {
			t.Errorf("Serve: %v", err)
		}
	})
	return a
}

// run runs a tool with SSH_AUTH_SOCK=sock and fails the test unless it
// succeeds.
func run(t *testing.T, sock string, name string, args ...string) string {
	t.Helper()
	out, err := try(sock, name, args...)
	if err != nil {
		t.Fatalf("%s %s: %v\n%s", name, strings.Join(args, " "), err, out)
	}
	return out
}

func try(sock string, name string, args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Env = []string{"SSH_AUTH_SOCK=" + sock, "PATH=/usr/bin:/bin"}
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// TestFilterRealAgent: through the filter, a real ssh-agent's key is
// listed and signs (audited with the key's fingerprint), and adding,
// removing, removing all, locking are refused and leave the agent as it
// was. Control: the same ssh-add calls against the raw agent succeed.
func TestFilterRealAgent(t *testing.T) {
	a := newAgent(t)
	fp := strings.Fields(run(t, "", "ssh-keygen", "-l", "-E", "sha256", "-f", a.key+".pub"))[1]
	if got := run(t, a.filtered, "ssh-add", "-l"); !strings.Contains(got, fp) {
		t.Fatalf("ssh-add -l through the filter = %q, want the key %s", got, fp)
	}
	data := filepath.Join(a.dir, "data")
	if err := os.WriteFile(data, []byte("sign me"), 0o600); err != nil {
		t.Fatal(err)
	}
	// -f names the public key: the private half is used through the agent.
	run(t, a.filtered, "ssh-keygen", "-Y", "sign", "-n", "file", "-f", a.key+".pub", data)
	if _, err := os.Stat(data + ".sig"); err != nil {
		t.Fatalf("no signature made through the filter: %v", err)
	}
	if !strings.Contains(a.audit.String(), `"fingerprint":"`+fp+`"`) || !strings.Contains(a.audit.String(), `"signed":true`) {
		t.Errorf("audit lacks the signature with %s:\n%s", fp, a.audit.String())
	}

	other := filepath.Join(a.dir, "other")
	run(t, "", "ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", other)
	refused := [][]string{{"-D"}, {"-d", a.key + ".pub"}, {other}}
	for _, args := range refused {
		if out, err := try(a.filtered, "ssh-add", args...); err == nil {
			t.Errorf("ssh-add %v through the filter succeeded: %s", args, out)
		}
	}
	if out, err := try(a.filtered, "ssh-add", "-l"); err != nil || !strings.Contains(out, fp) || strings.Count(out, "SHA256:") != 1 {
		t.Errorf("after the refused calls the agent lists %q (%v), want only %s", out, err, fp)
	}
	// ssh-add -D also sends the old protocol's remove-all (9).
	got := map[string]bool{}
	for _, r := range a.refused.List() {
		got[r.Host] = r.Kind == refusals.KindAgent
	}
	for _, w := range []string{"remove all identities", "rsa1 remove all", "remove identity", "add identity"} {
		if !got["ssh-agent "+w] {
			t.Errorf("no agent refusal of %q collected: %v", w, got)
		}
		if !strings.Contains(a.audit.String(), `"request":"`+w+`"`) {
			t.Errorf("no refusal of %q audited:\n%s", w, a.audit.String())
		}
	}

	// Control: the raw agent does each of them.
	run(t, a.raw, "ssh-add", "-q", other)
	run(t, a.raw, "ssh-add", "-d", a.key+".pub")
	run(t, a.raw, "ssh-add", "-D")
	if out, _ := try(a.raw, "ssh-add", "-l"); strings.Contains(out, "SHA256:") {
		t.Errorf("raw agent still lists keys after -D: %s", out)
	}
}

// TestFilterMessages: malformed and oversized messages never reach the
// agent. Table of raw requests and the filter's answer.
func TestFilterMessages(t *testing.T) {
	a := newAgent(t)
	msg := func(b ...byte) []byte {
		out := binary.BigEndian.AppendUint32(nil, uint32(len(b)))
		return append(out, b...)
	}
	tests := []struct {
		name string
		req  []byte
		want byte // answer type; 0: the connection ends
	}{
		{"list", msg(msgRequestIdentities), msgIdentitiesAnswer},
		{"list with a body", msg(msgRequestIdentities, 0), msgFailure},
		{"sign, key length past the end", msg(msgSignRequest, 0, 0, 0, 9, 1), msgFailure},
		{"sign with trailing bytes", msg(msgSignRequest, 0, 0, 0, 1, 'k', 0, 0, 0, 0, 0, 0, 0, 0, 9), msgFailure},
		{"lock", msg(22, 0, 0, 0, 1, 'x'), msgFailure},
		{"extension", msg(27, 0, 0, 0, 1, 'x'), msgFailure},
		{"unknown", msg(200), msgFailure},
		{"oversized", binary.BigEndian.AppendUint32(nil, MaxMessage+1), 0},
		{"empty", binary.BigEndian.AppendUint32(nil, 0), 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := net.Dial("unix", a.filtered)
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			_ = c.SetDeadline(time.Now().Add(10 * time.Second))
			if _, err := c.Write(tt.req); err != nil {
				t.Fatal(err)
			}
			ans, err := readMessage(c)
			switch {
			case tt.want == 0 && err == nil:
				t.Errorf("answer %v, want the connection closed", ans)
			case tt.want != 0 && err != nil:
				t.Errorf("no answer (%v), want type %d", err, tt.want)
			case tt.want != 0 && ans[0] != tt.want:
				t.Errorf("answer type %d, want %d", ans[0], tt.want)
			}
		})
	}
	if out := run(t, a.raw, "ssh-add", "-l"); strings.Contains(out, "locked") || !strings.Contains(out, "SHA256:") {
		t.Errorf("the agent changed: %s", out)
	}
}
