package sandbox

import (
	"context"
	"errors"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"

	"github.com/sandbox-run/sandbox-run/bwrap"
	"github.com/sandbox-run/sandbox-run/internal/fault"
	"github.com/sandbox-run/sandbox-run/internal/mechanism"
	"github.com/sandbox-run/sandbox-run/internal/ociimage"
	"github.com/sandbox-run/sandbox-run/internal/plan"
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
		return gvisorMechanism(p, cmd, opts)
	case policy.ModeBwrap:
		return bwrapMechanism(p, cmd, opts)
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

// imageOwn are the image's top-level entries the sandbox replaces with
// its own (/proc, /dev, /tmp) or that gVisor provides (/sys).
var imageOwn = []string{"proc", "dev", "sys", "tmp"}

// imageMounts replaces the host's system paths in mounts with the image's
// tree at rootfs: each top-level entry bound read-only (a link recreated
// as the same link), in front of the plan's own mounts. An entry on the
// way to one of the plan's destinations (/run for init's sockets, /home
// for a workdir below it) is not bound whole but made a directory of the
// bundle holding its entries, recursively: a mount point is never made
// inside the image's tree, which every run shares.
func imageMounts(rootfs string, mounts []bwrap.Mount) ([]bwrap.Mount, error) {
	var rest []bwrap.Mount
	var dests []string
	for _, m := range mounts {
		if slices.Contains(plan.SystemPaths, m.Dst) && (m.Kind == bwrap.Symlink || m.Src == m.Dst) {
			continue
		}
		rest = append(rest, m)
		if m.Dst != "" {
			dests = append(dests, m.Dst)
		}
	}
	var img []bwrap.Mount
	if err := imageDir(rootfs, "/", dests, &img); err != nil {
		return nil, fault.New("cannot read the image's tree "+rootfs, err.Error(), "remove "+filepath.Dir(rootfs)+" so that the next run unpacks it again")
	}
	return append(img, rest...), nil
}

func imageDir(rootfs, inside string, dests []string, out *[]bwrap.Mount) error {
	ents, err := os.ReadDir(filepath.Join(rootfs, inside))
	if err != nil {
		return err
	}
	for _, e := range ents {
		if inside == "/" && slices.Contains(imageOwn, e.Name()) {
			continue
		}
		src, dst := filepath.Join(rootfs, inside, e.Name()), path.Join(inside, e.Name())
		switch t := e.Type(); {
		case t&os.ModeSymlink != 0:
			target, err := os.Readlink(src)
			if err != nil {
				return err
			}
			*out = append(*out, bwrap.Mount{Kind: bwrap.Symlink, Src: target, Dst: dst, FD: -1})
		case t.IsDir() && slices.ContainsFunc(dests, func(d string) bool { return strings.HasPrefix(d, dst+"/") }):
			*out = append(*out, bwrap.Mount{Kind: bwrap.Dir, Dst: dst, FD: -1})
			if err := imageDir(rootfs, dst, dests, out); err != nil {
				return err
			}
		case t.IsDir() || t.IsRegular():
			*out = append(*out, bwrap.Mount{Kind: bwrap.ROBind, Src: src, Dst: dst, FD: -1})
		}
	}
	return nil
}

// imageEnv adds the image's configured variables (its PATH above all) to
// env, below what the policy names itself (--env, --pass-env): those
// win, the image's win over sandbox-run's defaults.
func imageEnv(env, image []string, p policy.Policy) []string {
	named := map[string]bool{}
	for k := range p.Env {
		named[k] = true
	}
	for _, k := range p.PassEnv {
		named[k] = true
	}
	idx := map[string]int{}
	for i, kv := range env {
		k, _, _ := strings.Cut(kv, "=")
		idx[k] = i
	}
	out := slices.Clone(env)
	for _, kv := range image {
		k, _, ok := strings.Cut(kv, "=")
		if !ok || k == "" || named[k] || strings.IndexByte(kv, 0) >= 0 {
			continue
		}
		if i, seen := idx[k]; seen {
			out[i] = kv
			continue
		}
		idx[k] = len(out)
		out = append(out, kv)
	}
	slices.Sort(out)
	return out
}
