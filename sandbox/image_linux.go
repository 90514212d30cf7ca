package sandbox

import (
	"context"
	"errors"
	"os"

	"github.com/sandbox-run/sandbox-run/internal/fault"
	"github.com/sandbox-run/sandbox-run/internal/mechanism"
	"github.com/sandbox-run/sandbox-run/internal/ociimage"
	"github.com/sandbox-run/sandbox-run/policy"
)

var toolPodman = mechanism.Tool{Name: "podman", Flag: "--podman", Install: "install podman (apt-get install -y podman), which keeps the images, or pass --podman PATH"}

// imageMechanism runs an image's tree under gVisor (tier 2) unless
// --sandbox bwrap asks for tier 1 by name: nothing weaker is ever chosen
// in gVisor's place.
func imageMechanism(p policy.Policy, cmd []string, opts mechanism.Config) (mechanism.Mechanism, error) {
	switch p.Sandbox {
	case policy.ModeAuto, policy.ModeGvisor, "":
		p.Sandbox = policy.ModeGvisor
		return mechanismFor(p, cmd, opts)
	case policy.ModeBwrap:
		return mechanismFor(p, cmd, opts)
	}
	return nil, fault.New("--image under --sandbox "+string(p.Sandbox), "container images run only under gVisor (tier 2) or, asked for by name, bwrap (tier 1)",
		"drop --sandbox, or pass --sandbox gvisor or --sandbox bwrap")
}

// resolveImage finds the run's image in podman's storage and its
// unpacked tree; nil when the run has none.
func resolveImage(ctx context.Context, p policy.Policy, opts Options) (*ociimage.Image, error) {
	src := opts.Image
	if src.Ref == "" {
		return nil, nil
	}
	ref, err := ociimage.ParseRef(src.Ref)
	if err != nil {
		return nil, imageErr(err)
	}
	podman, err := mechanism.FindTool(opts.Resolver, toolPodman, src.Podman, p.Writable())
	if err != nil {
		return nil, err
	}
	// As root, the trees go where the sandbox's own uid can reach them
	// (the data directory, /var/lib/sandbox-run, as for sessions' homes):
	// a tier-1 run's bwrap runs as that uid and resolves its binds by
	// path, and root's own cache lies below the closed /root.
	cache, shared := opts.BwrapCache, false
	if os.Geteuid() == 0 && opts.DataDir != "" {
		cache, shared = opts.DataDir, true
	}
	img, err := ociimage.Resolve(ctx, ociimage.Options{Ref: ref, Pull: src.Pull, Podman: podman,
		Env: podmanEnv(opts.LookupEnv), CacheDir: cache, Shared: shared})
	if err != nil {
		return nil, imageErr(err)
	}
	return &img, nil
}

// imageErr turns ociimage's refusals into the run's one-line setup
// error, keeping ErrAbsent and ErrDigest reachable with errors.Is.
func imageErr(err error) error {
	var e *ociimage.Error
	if errors.As(err, &e) {
		return &SetupError{What: e.What, Why: e.Why, Fix: e.Fix, Err: err}
	}
	return fault.New("--image", err.Error(), "check podman image ls")
}

// podmanEnv is what podman gets of sandbox-run's environment: what
// locates the user's storage and configuration, nothing else.
func podmanEnv(lookup func(string) (string, bool)) []string {
	env := []string{"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"}
	if lookup == nil {
		lookup = os.LookupEnv
	}
	for _, k := range []string{"HOME", "USER", "XDG_RUNTIME_DIR", "XDG_DATA_HOME", "XDG_CONFIG_HOME", "TMPDIR",
		"CONTAINERS_CONF", "CONTAINERS_STORAGE_CONF", "CONTAINERS_REGISTRIES_CONF", "REGISTRY_AUTH_FILE"} {
		if v, ok := lookup(k); ok {
			env = append(env, k+"="+v)
		}
	}
	return env
}
