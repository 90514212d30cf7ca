package ociimage

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"
)

// Options say which image to resolve and where to keep its tree.
type Options struct {
	Ref Ref
	// Pull fetches the image with `podman pull` when it is not stored;
	// otherwise an absent image is refused (ErrAbsent).
	Pull bool
	// Podman is the podman binary (the caller vets where it lies).
	Podman string
	// Env is podman's environment (HOME, XDG_RUNTIME_DIR and the like of
	// the caller: rootless podman finds its storage through them).
	Env []string
	// CacheDir is a private directory of the caller's; the trees are kept
	// in CacheDir/images/ID/rootfs.
	CacheDir string
	// Shared makes CacheDir/images searchable (0711, not 0700) by another
	// uid, the sandbox's, which may then open a tree it knows the path
	// of, never list the images. An image's files keep their own modes.
	Shared bool
}

// Image is a resolved image: what the report names and the tree to run.
type Image struct {
	Reference string // as given
	Digest    string // the pinned digest, else the manifest digest podman reports
	ID        string // podman's image ID, sha256:…
	Rootfs    string // the unpacked tree, read-only to every run
	Env       []string
}

// Resolve finds o.Ref in podman's storage (pulling it only when o.Pull),
// checks a pinned digest and returns the image with its unpacked tree.
func Resolve(ctx context.Context, o Options) (Image, error) {
	info, err := o.inspect(ctx)
	if errors.Is(err, ErrAbsent) && o.Pull {
		if err = o.pull(ctx); err == nil {
			info, err = o.inspect(ctx)
		}
	}
	if err != nil {
		return Image{}, err
	}
	dig := info.Digest
	if o.Ref.Digest != "" {
		if !info.Matches(o.Ref.Digest) {
			return Image{}, &Error{kind: ErrDigest, What: "--image " + o.Ref.String(),
				Why: "the stored " + o.Ref.Name + " is " + info.Digest + " (ID sha256:" + info.ID + "), not the pinned digest",
				Fix: "pin the digest podman image inspect " + o.Ref.Name + " shows, or fetch the pinned one with podman pull " + o.Ref.String()}
		}
		dig = o.Ref.Digest
	}
	root, err := o.tree(ctx, info.ID)
	if err != nil {
		return Image{}, err
	}
	return Image{Reference: o.Ref.String(), Digest: dig, ID: "sha256:" + info.ID, Rootfs: root, Env: info.Env}, nil
}

// podman runs podman with args and returns its stdout; its stderr's last
// line is the error.
func (o Options) podman(ctx context.Context, stdout io.Writer, args ...string) error {
	c := exec.CommandContext(ctx, o.Podman, args...)
	c.Env = o.Env
	var errb bytes.Buffer
	c.Stdout, c.Stderr = stdout, &errb
	if err := c.Run(); err != nil {
		msg := strings.TrimSpace(errb.String())
		if i := strings.LastIndexByte(msg, '\n'); i >= 0 {
			msg = msg[i+1:]
		}
		if msg == "" {
			msg = err.Error()
		}
		return errors.New(msg)
	}
	return nil
}

func (o Options) inspect(ctx context.Context) (Info, error) {
	var out bytes.Buffer
	// The name, never NAME@digest: the pin is checked against what the
	// name resolves to, so a different digest is refused, not looked up.
	err := o.podman(ctx, &out, "image", "inspect", "--format", "json", "--", o.Ref.Name)
	if err != nil {
		if ex, _ := o.exists(ctx); !ex {
			return Info{}, &Error{kind: ErrAbsent, What: "image " + o.Ref.String(),
				Why: "is not in this user's podman storage (uid " + fmt.Sprint(os.Getuid()) + ") and no pull was asked for",
				Fix: "fetch it with podman pull " + o.Ref.String() + " (or build it), or pass --pull"}
		}
		return Info{}, &Error{What: "cannot inspect image " + o.Ref.Name, Why: err.Error(), Fix: "check podman image inspect " + o.Ref.Name}
	}
	info, err := parseInspect(out.Bytes())
	if err != nil {
		return Info{}, &Error{What: "cannot read podman's description of " + o.Ref.Name, Why: err.Error(), Fix: "check podman image inspect " + o.Ref.Name}
	}
	return info, nil
}

// exists asks podman whether the name is stored (exit 1: it is not).
func (o Options) exists(ctx context.Context) (bool, error) {
	c := exec.CommandContext(ctx, o.Podman, "image", "exists", "--", o.Ref.Name)
	c.Env = o.Env
	err := c.Run()
	var ee *exec.ExitError
	if errors.As(err, &ee) && ee.ExitCode() == 1 {
		return false, nil
	}
	return err == nil, err
}

func (o Options) pull(ctx context.Context) error {
	if err := o.podman(ctx, io.Discard, "pull", "--quiet", "--", o.Ref.String()); err != nil {
		return &Error{What: "podman pull " + o.Ref.String(), Why: err.Error(), Fix: "check the reference and that its registry is reachable"}
	}
	return nil
}

// tree returns the unpacked tree of image id, unpacking it first when the
// cache has none.
func (o Options) tree(ctx context.Context, id string) (string, error) {
	fail := func(what string, err error) (string, error) {
		return "", &Error{What: what, Why: err.Error(), Fix: "check that " + o.CacheDir + " is writable and not full, and podman export works for this user"}
	}
	if o.CacheDir == "" {
		return "", &Error{What: "no cache directory for image trees", Why: "the user's cache directory is unknown", Fix: "set HOME or XDG_CACHE_HOME"}
	}
	base := filepath.Join(o.CacheDir, "images")
	dir := filepath.Join(base, id)
	if _, err := os.Stat(filepath.Join(dir, "complete")); err == nil {
		return filepath.Join(dir, "rootfs"), nil
	}
	mode := os.FileMode(0o700)
	if o.Shared {
		mode = 0o711
	}
	if err := os.MkdirAll(base, mode); err != nil {
		return fail("cannot create "+base, err)
	}
	if err := os.Chmod(base, mode); err != nil {
		return fail("cannot chmod "+base, err)
	}
	tmp, err := os.MkdirTemp(base, ".unpack-")
	if err != nil {
		return fail("cannot create a directory in "+base, err)
	}
	defer os.RemoveAll(tmp)
	if err := os.Chmod(tmp, 0o755); err != nil {
		return fail("cannot chmod "+tmp, err)
	}
	if err := o.unpack(ctx, id, filepath.Join(tmp, "rootfs")); err != nil {
		return fail("cannot unpack image "+o.Ref.Name, err)
	}
	if err := os.WriteFile(filepath.Join(tmp, "complete"), []byte(time.Now().UTC().Format(time.RFC3339)+"\n"), 0o444); err != nil {
		return fail("cannot write "+tmp, err)
	}
	// A parallel run may have finished first: its tree is as good.
	if err := os.Rename(tmp, dir); err != nil {
		if _, serr := os.Stat(filepath.Join(dir, "complete")); serr != nil {
			return fail("cannot move the tree into "+dir, err)
		}
	}
	return filepath.Join(dir, "rootfs"), nil
}

// unpack creates a container of image id (never started), streams its
// file system out with podman export and removes the container.
func (o Options) unpack(ctx context.Context, id, dst string) error {
	var cid bytes.Buffer
	if err := o.podman(ctx, &cid, "create", "--pull=never", "--quiet", "--entrypoint", "", id, "/sandbox-run-export"); err != nil {
		return fmt.Errorf("podman create: %s", err)
	}
	name := strings.TrimSpace(cid.String())
	defer o.podman(context.WithoutCancel(ctx), io.Discard, "rm", "--force", "--", name)
	if err := os.Mkdir(dst, 0o755); err != nil {
		return err
	}
	c := exec.CommandContext(ctx, o.Podman, "export", "--", name)
	c.Env = o.Env
	var errb bytes.Buffer
	c.Stderr = &errb
	out, err := c.StdoutPipe()
	if err != nil {
		return err
	}
	if err := c.Start(); err != nil {
		return err
	}
	xerr := extract(out, dst, os.Geteuid() == 0)
	io.Copy(io.Discard, out)
	werr := c.Wait()
	if werr != nil {
		return fmt.Errorf("podman export: %s", strings.TrimSpace(errb.String()+" "+werr.Error()))
	}
	return xerr
}
