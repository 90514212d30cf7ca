package hostnet

import (
	"github.com/sandbox-run/sandbox-run/internal/fault"
	"github.com/sandbox-run/sandbox-run/policy"
)

// setProxyEnv points every client convention the command may follow at the
// egress proxy on url: the HTTP(S)_PROXY family, npm, pip, and Node's own
// fetch. Loopback is left out (NO_PROXY): the LLM channel lives there, and
// the proxy would refuse loopback anyway.
func setProxyEnv(env map[string]string, url string) {
	for _, k := range append([]string{"HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "http_proxy", "https_proxy", "all_proxy"},
		policy.ProxyVars()...) {
		env[k] = url
	}
	env["NO_PROXY"] = "localhost,127.0.0.1,::1"
	env["no_proxy"] = env["NO_PROXY"]
	env["NODE_USE_ENV_PROXY"] = "1"
}

// offlineEnv returns the variables a run without egress sets, so that
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
func offlineEnv() map[string]string {
	env := policy.OfflineEnv()
	env["GIT_TERMINAL_PROMPT"] = "0"
	return env
}

// setOfflineEnv sets offlineEnv's variables in env.
func setOfflineEnv(env map[string]string) {
	for k, v := range offlineEnv() {
		env[k] = v
	}
}

// setLLMEnv points the command at the LLM channel on url: SANDBOX_LLM_URL
// and each name the policy lists (such as ANTHROPIC_BASE_URL).
func setLLMEnv(env map[string]string, url string, names []string) {
	env["SANDBOX_LLM_URL"] = url
	for _, name := range names {
		env[name] = url
	}
}

// secretsUnheld refuses secrets where the mechanism has no proxy that
// swaps them yet.
func secretsUnheld(p policy.Policy, mechanism string) error {
	if len(p.Secrets) == 0 && p.LLMKeyEnv == "" {
		return nil
	}
	return fault.New("--secret and --llm-key-env under "+mechanism, "this mechanism's proxy does not swap secrets yet", "run with --sandbox bwrap or --sandbox gvisor")
}
