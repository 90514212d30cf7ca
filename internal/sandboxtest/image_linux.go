package sandboxtest

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
)

// busyboxApplets are the commands the test image has, each a link to
// the static busybox.
var busyboxApplets = []string{"sh", "cat", "echo", "wget", "dmesg", "uname", "id", "true", "false", "ls", "test", "env", "head", "grep", "sleep", "nc", "cut"}

var imageSeq atomic.Int64

// Image is a container image a test built into podman's storage of the
// user running it.
type Image struct {
	Ref    string // localhost/NAME:1
	Digest string // the manifest digest podman reports
	ID     string // sha256:…
}

// BusyboxImage builds, with podman import (no registry), an image of
// Debian's static busybox (/bin and its applets, PATH=/bin) plus files:
// path inside -> file on the host, copied executable. It is removed from
// podman's storage when the test ends. It needs podman and busybox-static
// (scripts/install-deps.sh installs both); otherwise Unavailable.
func BusyboxImage(t testing.TB, files map[string]string) Image {
	t.Helper()
	podman, err := exec.LookPath("podman")
	if err != nil {
		Unavailable(t, "podman", "apt-get install -y podman (scripts/install-deps.sh)")
	}
	const busybox = "/bin/busybox"
	if out, err := exec.Command("file", "-L", busybox).Output(); err != nil || !bytes.Contains(out, []byte("statically linked")) {
		Unavailable(t, "a static "+busybox, "apt-get install -y busybox-static (scripts/install-deps.sh)")
	}
	root := filepath.Join(t.TempDir(), "rootfs")
	for _, d := range []string{"bin", "etc"} {
		if err := os.MkdirAll(filepath.Join(root, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	CopyExecutable(t, busybox, filepath.Join(root, "bin/busybox"))
	for _, a := range busyboxApplets {
		if err := os.Symlink("busybox", filepath.Join(root, "bin", a)); err != nil {
			t.Fatal(err)
		}
	}
	os.WriteFile(filepath.Join(root, "etc/image-marker"), []byte("busybox test image\n"), 0o644)
	for dst, src := range files {
		if err := os.MkdirAll(filepath.Join(root, filepath.Dir(dst)), 0o755); err != nil {
			t.Fatal(err)
		}
		CopyExecutable(t, src, filepath.Join(root, dst))
	}
	ref := fmt.Sprintf("localhost/sandbox-run-test-%d-%d:1", os.Getpid(), imageSeq.Add(1))
	tarc := exec.Command("tar", "-C", root, "-c", ".")
	imp := exec.Command(podman, "import", "--quiet", "--change", "ENV PATH=/bin:/usr/bin", "-", ref)
	pipe, err := tarc.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	imp.Stdin = pipe
	var errb bytes.Buffer
	imp.Stderr = &errb
	if err := tarc.Start(); err != nil {
		t.Fatal(err)
	}
	out, err := imp.Output()
	tarc.Wait()
	if err != nil {
		Unavailable(t, "podman import as uid "+fmt.Sprint(os.Getuid()), "check podman's storage for this user: "+strings.TrimSpace(errb.String()))
	}
	t.Cleanup(func() { exec.Command(podman, "rmi", "--force", ref).Run() })
	b, err := exec.Command(podman, "image", "inspect", "--format", "{{.Digest}} {{.Id}}", ref).Output()
	f := strings.Fields(string(b))
	if err != nil || len(f) != 2 {
		t.Fatalf("podman image inspect %s: %v %q (import said %q)", ref, err, b, out)
	}
	if os.Geteuid() == 0 {
		// As root, sandbox-run unpacks the tree into its data directory
		// (/var/lib/sandbox-run/images/ID), shared with the host's own
		// runs: the test's image goes with the test.
		t.Cleanup(func() { os.RemoveAll(filepath.Join("/var/lib/sandbox-run/images", f[1])) })
	}
	return Image{Ref: ref, Digest: f[0], ID: "sha256:" + f[1]}
}
