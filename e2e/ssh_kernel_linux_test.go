package e2e

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sandbox-run/sandbox-run/internal/sandboxtest"
)

// sshFixture is a real sshd in a test host's network namespace serving a
// bare git repository, a real ssh-agent holding the only key it accepts,
// and a HOME whose known_hosts names the server's host key.
type sshFixture struct {
	host              sandboxtest.TestHost
	agent, home, repo string
}

func newSSHFixture(t *testing.T) *sshFixture {
	t.Helper()
	sandboxtest.Root(t) // sshd lives in a test host's network namespace, and transparent egress needs root
	for _, p := range []string{"/usr/sbin/sshd", "/usr/bin/ssh-agent", "/usr/bin/ssh-keygen", "/usr/bin/git"} {
		if _, err := os.Stat(p); err != nil {
			sandboxtest.Unavailable(t, p, "install openssh-server, openssh-client and git (scripts/install-deps.sh)")
		}
	}
	h := sandboxtest.NewTestHost(t, 1)
	dir, err := os.MkdirTemp("", "srpssh")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	f := &sshFixture{host: h, agent: filepath.Join(dir, "agent.sock"), home: filepath.Join(dir, "home"), repo: filepath.Join(dir, "repo.git")}
	sh(t, "", "ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", filepath.Join(dir, "hostkey"))
	sh(t, "", "ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", filepath.Join(dir, "id"))
	sh(t, "", "cp", filepath.Join(dir, "id.pub"), filepath.Join(dir, "authorized_keys"))
	sh(t, "", "git", "init", "-q", "--bare", "-b", "main", f.repo)
	os.MkdirAll("/run/sshd", 0o755) // sshd's privilege separation directory
	cfg := fmt.Sprintf("ListenAddress %s:22\nHostKey %s\nAuthorizedKeysFile %s\nPidFile none\nUsePAM no\nStrictModes no\nPermitRootLogin prohibit-password\nPasswordAuthentication no\nKbdInteractiveAuthentication no\n",
		h.Addr, filepath.Join(dir, "hostkey"), filepath.Join(dir, "authorized_keys"))
	if err := os.WriteFile(filepath.Join(dir, "sshd_config"), []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	f.start(t, "ip", "netns", "exec", h.Netns, "/usr/sbin/sshd", "-D", "-e", "-f", filepath.Join(dir, "sshd_config"))
	f.start(t, "ssh-agent", "-D", "-a", f.agent)
	pollUntil(10*time.Second, func() bool { _, err := os.Stat(f.agent); return err == nil })
	sh(t, f.agent, "ssh-add", "-q", filepath.Join(dir, "id"))
	pub, err := os.ReadFile(filepath.Join(dir, "hostkey.pub"))
	if err != nil {
		t.Fatal(err)
	}
	fields := strings.Fields(string(pub))
	os.MkdirAll(filepath.Join(f.home, ".ssh"), 0o700)
	kh := fmt.Sprintf("%s %s %s\n", h.Addr, fields[0], fields[1])
	if err := os.WriteFile(filepath.Join(f.home, ".ssh", "known_hosts"), []byte(kh), 0o644); err != nil {
		t.Fatal(err)
	}
	return f
}

// start runs a server for the test's lifetime.
func (f *sshFixture) start(t *testing.T, name string, args ...string) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.WaitDelay = 5 * time.Second
	if err := cmd.Start(); err != nil {
		cancel()
		t.Fatalf("%s: %v", name, err)
	}
	t.Cleanup(func() { cancel(); _ = cmd.Wait() })
}

// sh runs a host command (SSH_AUTH_SOCK=agent when set) and fails the
// test unless it succeeds.
func sh(t *testing.T, agent string, name string, args ...string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Env = append(os.Environ(), "SSH_AUTH_SOCK="+agent)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("%s %s: %v\n%s", name, strings.Join(args, " "), err, out)
	}
	return string(out)
}

// pollUntil polls cond every 50 ms until it holds or d has passed.
func pollUntil(d time.Duration, cond func() bool) bool {
	for end := time.Now().Add(d); time.Now().Before(end); time.Sleep(50 * time.Millisecond) {
		if cond() {
			return true
		}
	}
	return cond()
}

// TestSSHGitThroughAgent: inside the sandbox, with --allow-host ADDR:22
// and --ssh-agent, git clones and pushes over SSH to a real sshd with the
// key of the user's agent through the filter, and ssh-add cannot remove
// the key (named on stderr). Controls: the same clone from the host with
// the raw agent succeeds (the server works); inside without --ssh-agent
// it is refused (the key came only through the filter); without the
// --allow-host entry it cannot connect, and the fix is named.
func TestSSHGitThroughAgent(t *testing.T) {
	f := newSSHFixture(t)
	url := fmt.Sprintf("ssh://root@%s/%s", f.host.Addr, f.repo)
	hostClone := filepath.Join(sandboxtest.WorkDir(t), "c")
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	ctl := exec.CommandContext(ctx, "git", "clone", "-q", url, hostClone)
	ctl.Env = append(os.Environ(), "SSH_AUTH_SOCK="+f.agent,
		"GIT_SSH_COMMAND=ssh -o UserKnownHostsFile="+filepath.Join(f.home, ".ssh", "known_hosts"))
	if out, err := ctl.CombinedOutput(); err != nil {
		t.Fatalf("control: clone from the host with the raw agent failed (untested): %v\n%s", err, out)
	}

	script := fmt.Sprintf(`set -e
git clone -q %s repo 2>&1
cd repo
echo hello > f.txt
git add f.txt
git -c user.name=t -c user.email=t@example.invalid commit -qm from-sandbox-$1
git push -q origin HEAD:main-$1 2>&1
echo PUSHED
ssh-add -l
ssh-add -D 2>&1 && echo REMOVED || echo REMOVE-REFUSED`, url)
	env := []string{"SSH_AUTH_SOCK=" + f.agent, "HOME=" + f.home}
	allow := "--allow-host=" + f.host.Addr.String() + ":22"
	for _, m := range handInMechanisms {
		t.Run(m.name, func(t *testing.T) {
			m.need(t)
			sshThroughAgent(t, f, url, script, env, allow, m.name)
		})
	}
}

// sshThroughAgent is TestSSHGitThroughAgent's sandboxed part under one
// mechanism (mode), with its controls.
func sshThroughAgent(t *testing.T, f *sshFixture, url, script string, env []string, allow, mode string) {
	w := sandboxtest.WorkDir(t)
	audit := filepath.Join(sandboxtest.WorkDir(t), "audit.jsonl")
	r := runEnv(t, env, "", "run", "--workdir", w, "--sandbox", mode, allow, "--ssh-agent", "--audit", audit, "--", "sh", "-c", script, "sh", mode)
	if !strings.Contains(r.stdout, "PUSHED") {
		t.Fatalf("clone and push through the filtered agent failed: exit %d\n%s\n%s", r.code, r.stdout, r.stderr)
	}
	if log := sh(t, "", "git", "--git-dir", f.repo, "log", "--format=%s", "main-"+mode); !strings.Contains(log, "from-sandbox-"+mode) {
		t.Errorf("the pushed commit is not in the server's repository: %q", log)
	}
	if !strings.Contains(r.stdout, "REMOVE-REFUSED") || !strings.Contains(r.stderr, "remove all identities") {
		t.Errorf("ssh-add -D through the filter was not refused and named: %q %q", r.stdout, r.stderr)
	}
	if out := sh(t, f.agent, "ssh-add", "-l"); !strings.Contains(out, "SHA256:") {
		t.Errorf("the agent lost its key: %q", out)
	}
	if ev := auditEvents(t, audit, "ssh_agent_sign"); len(ev) < 2 {
		t.Errorf("audit: %d signatures, want one per ssh connection (clone, push)", len(ev))
	}

	r = runEnv(t, env, "", "run", "--workdir", sandboxtest.WorkDir(t), "--sandbox", mode, allow, "--", "sh", "-c", "git clone -q "+url+" repo 2>&1; echo CLONE-EXIT=$?")
	if !strings.Contains(r.stdout, "CLONE-EXIT=128") {
		t.Errorf("control: without --ssh-agent the clone did not fail: %q %q", r.stdout, r.stderr)
	}
	r = runEnv(t, env, "", "run", "--workdir", sandboxtest.WorkDir(t), "--sandbox", mode, "--allow-host", "example.org", "--ssh-agent", "--", "sh", "-c", "git clone -q "+url+" repo 2>&1; echo CLONE-EXIT=$?")
	if !strings.Contains(r.stdout, "CLONE-EXIT=128") || !strings.Contains(r.stderr, "--allow-host "+f.host.Addr.String()+":22") {
		t.Errorf("control: without the --allow-host entry: %q, stderr %q (want the clone refused and the flag named)", r.stdout, r.stderr)
	}
}
