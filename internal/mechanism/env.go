package mechanism

import (
	"errors"
	"fmt"
	"os"
	"sort"
	"strings"

	"github.com/sandbox-run/sandbox-run/internal/fault"
	"github.com/sandbox-run/sandbox-run/internal/gitrepo"
	"github.com/sandbox-run/sandbox-run/policy"
	"github.com/sandbox-run/sandbox-run/report"
)

// Cleanups is a stack of what to undo, run last in, first out: a
// mechanism pushes each release as it acquires the thing released.
type Cleanups []func()

// Push adds f, to run before every cleanup pushed earlier.
func (c *Cleanups) Push(f func()) { *c = append(*c, f) }

// Run runs and forgets every cleanup, the last pushed first.
func (c *Cleanups) Run() {
	for i := len(*c) - 1; i >= 0; i-- {
		(*c)[i]()
	}
	*c = nil
}

// KilledError means the mechanism itself (bwrap) died of a signal that
// sandbox-run did not send and no limit explains: someone killed it. The
// sandbox ended with it; the command's own status is lost (Run reports it
// as ClassMechanismKilled, 125).
type KilledError struct {
	Mechanism string
	Signal    int
}

func (e *KilledError) Error() string {
	return fmt.Sprintf("%s was killed by signal %d; the sandbox was ended with it and the command's status is lost", e.Mechanism, e.Signal)
}

// HostIDs are the host uid and gid the sandbox runs as: the caller's, or
// the policy's when sandbox-run is root (root says so), never uid 0.
func HostIDs(p policy.Policy) (uid, gid int, root bool, err error) {
	if os.Geteuid() != 0 {
		return os.Getuid(), os.Getgid(), false, nil
	}
	if p.UID == 0 {
		return 0, 0, true, &policy.InvalidError{Field: "user", Reason: "uid 0 is host root", Fix: "pass --user with an unprivileged uid"}
	}
	return p.UID, p.GID, true, nil
}

// SetProxyEnv points every client convention the command may follow at the
// egress proxy on url: the HTTP(S)_PROXY family, npm, pip, and Node's own
// fetch. Loopback is left out (NO_PROXY): the LLM channel lives there, and
// the proxy would refuse loopback anyway.
func SetProxyEnv(env map[string]string, url string) {
	for _, k := range append([]string{"HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "http_proxy", "https_proxy", "all_proxy"},
		policy.ProxyVars()...) {
		env[k] = url
	}
	env["NO_PROXY"] = "localhost,127.0.0.1,::1"
	env["no_proxy"] = env["NO_PROXY"]
	env["NODE_USE_ENV_PROXY"] = "1"
}

// OfflineEnv returns the variables a run without egress sets, so that
// package managers fail at once with their own error instead of retrying a
// network that is not there (npm's default retries take over a minute, pip's
// several seconds; MCP clients give up after 30). They go into the command's
// environment below the policy's own Env, which overrides any of them, and
// are named in the report's environment like every other variable. The
// package managers' are their Offline and Quiet settings in policy's one
// table (policy.OfflineEnv):
//
//   - npm_config_offline: npm and npx use only their cache (ENOTCACHED
//     otherwise); npm_config_fetch_retries=0 in case offline is overridden;
//     npm_config_update_notifier=false skips the version check.
//   - PIP_RETRIES=0, PIP_DISABLE_PIP_VERSION_CHECK=1: pip fails on the
//     first name resolution error.
//   - UV_OFFLINE=1, CARGO_NET_OFFLINE=true: uv and cargo use their caches.
//   - GOPROXY=off: go fails naming GOPROXY=off instead of dialling.
//   - GIT_TERMINAL_PROMPT=0: git never waits for a password on the
//     terminal (git itself does not retry).
func OfflineEnv() map[string]string {
	env := policy.OfflineEnv()
	env["GIT_TERMINAL_PROMPT"] = "0"
	return env
}

// SetOfflineEnv sets OfflineEnv's variables in env.
func SetOfflineEnv(env map[string]string) {
	for k, v := range OfflineEnv() {
		env[k] = v
	}
}

// SetLLMEnv points the command at the LLM channel on url: SANDBOX_LLM_URL
// and each name the policy lists (such as ANTHROPIC_BASE_URL).
func SetLLMEnv(env map[string]string, url string, names []string) {
	env["SANDBOX_LLM_URL"] = url
	for _, name := range names {
		env[name] = url
	}
}

// SecretsUnheld refuses secrets where the mechanism has no proxy that
// swaps them yet.
func SecretsUnheld(p policy.Policy, mechanism string) error {
	if len(p.Secrets) == 0 && p.LLMKeyEnv == "" {
		return nil
	}
	return fault.New("--secret and --llm-key-env under "+mechanism, "this mechanism's proxy does not swap secrets yet", "run with --sandbox bwrap or --sandbox gvisor")
}

// CommandEnv is the command's environment: the network's variables, then
// the policy's (which may override them).
func CommandEnv(p policy.Policy, netEnv map[string]string, lookup func(string) (string, bool)) ([]string, error) {
	penv, err := p.Environ(lookup)
	if err != nil {
		return nil, err
	}
	m := make(map[string]string, len(netEnv)+len(penv))
	for k, v := range netEnv {
		m[k] = v
	}
	// git's config channel has two writers, the run's (the secrets'
	// credential helpers) and the policy's (the caller's identity): the
	// run's entries go after the policy's, neither overwriting the other.
	keys, vals := gitrepo.TakeEnvConfig(m)
	for _, kv := range penv {
		k, v, _ := strings.Cut(kv, "=")
		m[k] = v
	}
	gitrepo.AppendEnvConfig(m, keys, vals)
	out := make([]string, 0, len(m))
	for k, v := range m {
		out = append(out, k+"="+v)
	}
	sort.Strings(out)
	return out, nil
}

// ErrUnsupported means the requested mechanism does not exist on this
// platform. It matches errors.ErrUnsupported.
var ErrUnsupported = fmt.Errorf("sandbox: mechanism unsupported here: %w", errors.ErrUnsupported)

// Why the mechanisms without a TUN device on the host side have no
// transparent egress: only tools that use the proxy variables get out.
const (
	NoTransparentLandlock = "no network namespace under Landlock: TCP connect is confined to the proxy's port, so only tools that use the HTTP proxy variables get out"
	NoTransparentSeatbelt = "no network namespace under Seatbelt: the profile allows only the proxy's loopback port, so only tools that use the HTTP proxy variables get out"
)

// TransparentLost is the report's Transparent for a mechanism that has
// none, or nil when the run has no network to speak of.
func TransparentLost(network, why string) *report.Transparent {
	if network == "none" || network == "" {
		return nil
	}
	return &report.Transparent{Reason: why}
}
