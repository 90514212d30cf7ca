package cli

import (
	"github.com/spf13/pflag"

	"github.com/sandbox-run/sandbox-run/sandbox"
)

// imageFlags are run's and mcp's container image flags (docs/gvisor.md).
type imageFlags struct {
	ref, podman, runtime string
	pull                 bool
}

func (f *imageFlags) register(fs *pflag.FlagSet) {
	fs.StringVar(&f.ref, "image", "", "run in this container image's file system under gVisor (tier 2): NAME or NAME@sha256:DIGEST from podman's storage")
	fs.BoolVar(&f.pull, "pull", false, "with --image: let podman pull the image when it is not stored (default: refuse)")
	fs.StringVar(&f.podman, "podman", "", "podman binary that holds the images (default: podman on PATH)")
	fs.StringVar(&f.runtime, "image-runtime", "runsc", "with --image: runsc (gVisor, tier 2); runc is refused: tier 1 over an image is --sandbox bwrap (sandbox-run's filter and mounts)")
}

// source is the sandbox's view of the flags; an error for a runtime that
// is not supported.
func (f *imageFlags) source() (sandbox.ImageSource, error) {
	if f.runtime != "runsc" {
		return sandbox.ImageSource{}, &sandbox.SetupError{What: "--image-runtime " + f.runtime,
			Why: "images run only under gVisor's runsc in this version", Fix: "drop --image-runtime (runsc is the default); for tier 1 (the host's kernel, sandbox-run's bwrap and seccomp) pass --sandbox bwrap"}
	}
	return sandbox.ImageSource{Ref: f.ref, Pull: f.pull, Podman: f.podman}, nil
}
