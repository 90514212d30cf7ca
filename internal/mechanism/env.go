package mechanism

import (
	"errors"
	"fmt"
	"os"
	"sort"
	"strings"

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
