//go:build linux

package main

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"
)

// The image start-ups (issue 39): run --image against podman with the
// same runtime and against gVisor's quickest start.
const (
	vSRImage     = "sandbox-run run --image IMG -- true (gVisor)"
	vPodmanRunsc = "podman run --rm --runtime runsc IMG true"
)

// imageVariants builds the bench's image (Debian's static busybox, podman
// import, no registry) and returns run --image, podman run with runsc and
// runsc do, and a cleanup that removes the image. run --image is started
// once first, so the one-time unpacking of the image into sandbox-run's
// cache is not measured.
func (e *env) imageVariants() ([]variant, func(), error) {
	podman, err := exec.LookPath("podman")
	if err != nil {
		return nil, nil, errors.New("no podman on PATH")
	}
	runsc, err := exec.LookPath("runsc")
	if err != nil {
		return nil, nil, errors.New("no runsc on PATH")
	}
	ref, cleanup, err := e.benchImage(podman)
	if err != nil {
		return nil, nil, err
	}
	// The image's tree is unpacked into a cache of the bench's own
	// (removed with e.base), not the user's.
	cache := filepath.Join(e.base, "image-cache")
	if err := os.Mkdir(cache, 0o700); err != nil {
		cleanup()
		return nil, nil, err
	}
	srv := e.sandboxRun([]string{"--image", ref}, "true")
	sr := variant{cmd: func(ctx context.Context) (*exec.Cmd, func()) {
		c, done := srv.cmd(ctx)
		c.Env = append(os.Environ(), "XDG_CACHE_HOME="+cache)
		return c, done
	}}
	ctx, cancel := context.WithTimeout(context.Background(), runTimeout)
	defer cancel()
	c, _ := sr.cmd(ctx)
	if out, err := c.CombinedOutput(); err != nil {
		cleanup()
		return nil, nil, fmt.Errorf("run --image %s: %v: %s", ref, err, out)
	}
	args := []string{"run", "--rm", "--runtime", runsc, "--runtime-flag", "network=none", "--runtime-flag", "ignore-cgroups", "--network", "none", ref, "true"}
	pv := variant{name: vPodmanRunsc, cmd: func(ctx context.Context) (*exec.Cmd, func()) {
		return exec.CommandContext(ctx, podman, args...), nil
	}}
	sr.name = vSRImage
	do := e.runscDo(runsc)
	do.name = vRunscDo
	return []variant{sr, pv, do}, cleanup, nil
}

// imageStartups is run --image and podman run --runtime runsc for make
// bench's start-up table (runsc do is there already); none, with the
// reason on stderr, when they cannot run here.
func (e *env) imageStartups() []variant {
	ivs, cleanup, err := e.imageVariants()
	if err != nil {
		fmt.Fprintln(os.Stderr, "bench: images not measured:", err)
		return nil
	}
	atExit(cleanup)
	return ivs[:2]
}

// benchImage imports /bin/busybox (static) with true as its link.
func (e *env) benchImage(podman string) (string, func(), error) {
	root := filepath.Join(e.base, "image-root")
	if err := os.MkdirAll(filepath.Join(root, "bin"), 0o755); err != nil {
		return "", nil, err
	}
	b, err := os.ReadFile("/bin/busybox")
	if err != nil {
		return "", nil, fmt.Errorf("no /bin/busybox (apt-get install -y busybox-static): %w", err)
	}
	if err := os.WriteFile(filepath.Join(root, "bin/busybox"), b, 0o755); err != nil {
		return "", nil, err
	}
	for _, a := range []string{"true", "sh"} {
		os.Symlink("busybox", filepath.Join(root, "bin", a))
	}
	ref := fmt.Sprintf("localhost/sandbox-run-bench-%d:1", os.Getpid())
	tarc := exec.Command("tar", "-C", root, "-c", ".")
	imp := exec.Command(podman, "import", "--quiet", "--change", "ENV PATH=/bin", "-", ref)
	if imp.Stdin, err = tarc.StdoutPipe(); err != nil {
		return "", nil, err
	}
	var errb bytes.Buffer
	imp.Stderr = &errb
	if err := tarc.Start(); err != nil {
		return "", nil, err
	}
	err = imp.Run()
	tarc.Wait()
	if err != nil {
		return "", nil, fmt.Errorf("podman import: %v: %s", err, strings.TrimSpace(errb.String()))
	}
	return ref, func() { exec.Command(podman, "rmi", "--force", ref).Run() }, nil
}

// imagesMain is `sbx-bench images [-bin B] [-n N]`: the three image
// start-ups interleaved, printed with their ratios; nothing written.
func imagesMain(args []string) int {
	fs := flag.NewFlagSet("images", flag.ContinueOnError)
	bin := fs.String("bin", "bin/sandbox-run", "sandbox-run binary")
	rounds := fs.Int("n", 15, "rounds (each variant once per round)")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	defer runCleanups()
	e, err := setup(*bin)
	if err != nil {
		fmt.Fprintln(os.Stderr, "bench: setup:", err)
		return 1
	}
	return imageMain(e, *rounds, time.Now().Add(20*time.Minute))
}

// imageMain runs and prints the image start-ups.
func imageMain(e *env, rounds int, deadline time.Time) int {
	vs, cleanup, err := e.imageVariants()
	if err != nil {
		fmt.Fprintln(os.Stderr, "bench: images:", err)
		return 1
	}
	defer cleanup()
	times, failed := interleave(vs, rounds, deadline)
	fmt.Printf("%-52s %10s %10s %10s  (n=%d, interleaved)\n", "command", "median", "min", "max", rounds)
	for _, v := range vs {
		if t := times[v.name]; len(t) > 0 {
			fmt.Printf("%-52s %10s %10s %10s\n", v.name, ms(t.median()), ms(t.min()), ms(t.max()))
		}
	}
	for _, line := range imageRatios(times) {
		fmt.Println(line)
	}
	if len(failed) > 0 {
		return 1
	}
	return 0
}

// imageRatios are the goal's comparisons (run --image no slower than
// podman with runsc) and the cost over runsc do.
func imageRatios(times map[string]sample) []string {
	sr, pd, do := times[vSRImage].median(), times[vPodmanRunsc].median(), times[vRunscDo].median()
	var out []string
	if sr > 0 && pd > 0 {
		out = append(out, fmt.Sprintf("ratio run --image / podman run --runtime runsc (medians): %s (goal <= 1.00x)", ratio(sr, pd)))
	}
	if sr > 0 && do > 0 {
		out = append(out, fmt.Sprintf("ratio run --image / runsc do true (medians): %s", ratio(sr, do)))
	}
	return out
}

// imageGoal is the goal row of run --image against podman with runsc; none
// when either was not measured.
func (r *report) imageGoal() [][3]string {
	img, pd := r.med(vSRImage), r.med(vPodmanRunsc)
	if img == 0 || pd == 0 {
		return nil
	}
	x := float64(img) / float64(pd)
	return [][3]string{{"start-up: run --image ≤ podman run --runtime runsc", fmt.Sprintf("%.2fx (%s of runsc do)", x, ratio(img, r.med(vRunscDo))),
		verdict(x <= 1, fmt.Sprintf("%.2fx over", x-1))}}
}
