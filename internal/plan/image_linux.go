package plan

import (
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"

	"github.com/sandbox-run/sandbox-run/internal/fault"
	"github.com/sandbox-run/sandbox-run/mount"
	"github.com/sandbox-run/sandbox-run/policy"
)

// imageOwn are the image's top-level entries the sandbox replaces with
// its own (/proc, /dev, /tmp) or that gVisor provides (/sys).
var imageOwn = []string{"proc", "dev", "sys", "tmp"}

// ImageMounts replaces the host's system paths in mounts with the image's
// tree at rootfs: each top-level entry bound read-only (a link recreated
// as the same link), in front of the plan's own mounts. An entry on the
// way to one of the plan's destinations (/run for init's sockets, /home
// for a workdir below it) is not bound whole but made a directory of the
// bundle holding its entries, recursively: a mount point is never made
// inside the image's tree, which every run shares.
func ImageMounts(rootfs string, mounts []mount.Step) ([]mount.Step, error) {
	var rest []mount.Step
	var dests []string
	for _, m := range mounts {
		if slices.Contains(SystemPaths, m.Dst) && (m.Kind == mount.Symlink || m.Src == m.Dst) {
			continue
		}
		rest = append(rest, m)
		if m.Dst != "" {
			dests = append(dests, m.Dst)
		}
	}
	var img []mount.Step
	if err := imageDir(rootfs, "/", dests, &img); err != nil {
		return nil, fault.New("cannot read the image's tree "+rootfs, err.Error(), "remove "+filepath.Dir(rootfs)+" so that the next run unpacks it again")
	}
	return append(img, rest...), nil
}

func imageDir(rootfs, inside string, dests []string, out *[]mount.Step) error {
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
			*out = append(*out, mount.Step{Kind: mount.Symlink, Src: target, Dst: dst, FD: -1})
		case t.IsDir() && slices.ContainsFunc(dests, func(d string) bool { return strings.HasPrefix(d, dst+"/") }):
			*out = append(*out, mount.Step{Kind: mount.Dir, Dst: dst, FD: -1})
			if err := imageDir(rootfs, dst, dests, out); err != nil {
				return err
			}
		case t.IsDir() || t.IsRegular():
			*out = append(*out, mount.Step{Kind: mount.ROBind, Src: src, Dst: dst, FD: -1})
		}
	}
	return nil
}

// ImageEnv adds the image's configured variables (its PATH above all) to
// env, below what the policy names itself (--env, --pass-env): those
// win, the image's win over sandbox-run's defaults.
func ImageEnv(env, image []string, p policy.Policy) []string {
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
