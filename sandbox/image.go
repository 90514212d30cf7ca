package sandbox

// ImageSource names a container image whose file system is the sandbox's
// root instead of the host's (run --image, mcp --image). The image comes
// from podman's local storage of the user running sandbox-run and runs
// under gVisor (tier 2): the policy's mode must be auto or gvisor.
type ImageSource struct {
	// Ref is NAME[@sha256:HEX]; a pinned digest refuses any other image.
	Ref string
	// Pull lets podman fetch an image that is not stored; without it an
	// absent image is refused with the command that fetches it.
	Pull bool
	// Podman is the podman binary; empty means podman on PATH. Refused
	// like BwrapPath when it lies in a writable directory.
	Podman string
}
