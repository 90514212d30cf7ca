package bwrap

import (
	"context"
	"os"
	"path/filepath"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/sandbox-run/sandbox-run/internal/fault"
	"github.com/sandbox-run/sandbox-run/internal/plan"
	"github.com/sandbox-run/sandbox-run/mount"
	"github.com/sandbox-run/sandbox-run/report"
)

// image resolves --image for a tier-1 run (--sandbox bwrap): the image's
// tree replaces the host's system paths in the mount plan (bwrapArgs),
// its variables join the environment, and init starts the command.
//
// As root the tree lies in the data directory, which the sandbox's uid
// may traverse (resolveImage): bwrap, running as that uid, resolves even
// a bind by descriptor through its path.
func (r *bwRun) image(ctx context.Context) (err error) {
	if r.opts.Image == nil {
		return nil
	}
	r.img, err = r.opts.Image(ctx)
	return err
}

// imageReport names the image in a tier-1 report and says what its tree
// replaced; it leaves rep alone without --image.
func (r *bwRun) imageReport(rep *report.Report) {
	if r.img == nil {
		return
	}
	rep.Image = &report.ImageReport{Reference: r.img.Reference, Digest: r.img.Digest, ID: r.img.ID}
	rep.Notes = append(rep.Notes, "root file system: image "+r.img.Reference+" ("+r.img.Digest+"), unpacked read-only in "+filepath.Dir(r.img.Rootfs)+"; the host's system paths are not bound; tier 1: the host's kernel runs the image's code (bwrap, seccomp), asked for with --sandbox bwrap")
}

// imageBinds swaps the host's system paths in the plan for the image's
// tree (imageMounts). Where bwrap binds by descriptor, each of the
// image's entries is opened here, by sandbox-run: the unpacked tree lies
// below a 0700 cache the sandbox's user may not traverse. It runs before
// command, which counts the plan's descriptors.
func (r *bwRun) imageBinds(context.Context) error {
	if r.img == nil {
		return nil
	}
	pl := r.pl
	mounts, err := plan.ImageMounts(r.img.Rootfs, append(append([]mount.Step(nil), pl.Mounts...), pl.Late...))
	if err != nil {
		return err
	}
	if pl.ByFD {
		prefix := r.img.Rootfs + "/"
		for i, m := range mounts {
			if m.Kind != mount.ROBind || m.FD >= 0 || !strings.HasPrefix(m.Src, prefix) {
				continue
			}
			f, err := os.OpenFile(m.Src, unix.O_PATH|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
			if err != nil {
				return fault.New("cannot open the image's "+m.Dst, err.Error(), "remove "+filepath.Dir(r.img.Rootfs)+" so that the next run unpacks it again")
			}
			mounts[i].FD = pl.FDBase + len(pl.Files)
			pl.Files = append(pl.Files, f)
		}
	}
	pl.Mounts, pl.Late = mounts, nil
	return nil
}
