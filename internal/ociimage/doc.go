// Package ociimage makes a container image in podman's local storage
// usable as the root file system of a tier-2 run: it resolves a
// reference to the image's identity (its ID and manifest digest), checks
// a pinned digest, and unpacks the image once per ID into a private cache
// directory as a plain tree.
//
// Podman owns the images: what it pulled or built (podman pull, podman
// build, podman import) is what can run, in the storage of the user
// running sandbox-run (rootless podman keeps one per user). Nothing is
// pulled unless the caller asks (Options.Pull).
//
// # Guarantees
//
//   - A reference pinned with @sha256:… resolves only to an image whose
//     manifest digest, one of its repository digests, or its ID is that
//     digest; any other is refused with ErrDigest.
//   - An image absent from local storage is refused with ErrAbsent unless
//     Options.Pull is set; the error's fix names the podman command that
//     fetches it.
//   - The tree is unpacked from podman export of a container created from
//     the image's ID (the very image inspected, whatever its tag says
//     meanwhile) into a fresh directory, every entry through an os.Root:
//     no entry's name or link leads the unpacking outside that directory.
//     Set-uid and set-gid bits are dropped; device nodes, FIFOs and
//     sockets are skipped (the sandbox's /dev is its own). It is renamed
//     into place only once complete.
//
// # Non-guarantees
//
//   - File ownership is kept only when the caller is root; rootless, every
//     file is the caller's (gVisor's rootless mode shows them as uid 0).
//   - The cache is kept per image ID and never pruned here; removing
//     CACHE/images costs the next run one unpacking.
package ociimage
