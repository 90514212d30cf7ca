package main

import (
	"bytes"
	"context"
	"debug/elf"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/sandbox-run/sandbox-run/internal/sandboxtest"
)

const modulePath = "github.com/sandbox-run/sandbox-run"

// installTimeout bounds each go, git and make command of these tests: they
// compile the whole binary, which on a loaded 2-core CI host takes minutes
// when the build cache is cold.
const installTimeout = 10 * time.Minute

// tool runs name with args in dir (env added to the test's own, minus the
// go command's settings the caller replaces) and returns its stdout, failing
// the test with its output when it fails.
func tool(t *testing.T, dir string, env []string, name string, args ...string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), installTimeout)
	defer cancel()
	c := exec.CommandContext(ctx, name, args...)
	c.Dir = dir
	c.Env = append(goEnv(), env...)
	var out, errb bytes.Buffer
	c.Stdout, c.Stderr = &out, &errb
	if err := c.Run(); err != nil {
		t.Fatalf("%s %s: %v\n%s%s", name, strings.Join(args, " "), err, out.String(), errb.String())
	}
	return out.String()
}

// goEnv is the test's environment without the go command's settings that
// would change what is built or fetched (a GOFLAGS of the caller's, its
// proxy, its install directory), and with the local toolchain only.
func goEnv() []string {
	var env []string
	for _, kv := range os.Environ() {
		k, _, _ := strings.Cut(kv, "=")
		switch k {
		case "GOFLAGS", "GOPROXY", "GOSUMDB", "GONOSUMDB", "GOPRIVATE", "GONOPROXY", "GOBIN", "GOMODCACHE", "GOTOOLCHAIN":
			continue
		}
		env = append(env, kv)
	}
	return append(env, "GOTOOLCHAIN=local")
}

// need gates a test on a program (fails under SANDBOX_REQUIRE=1).
func need(t *testing.T, names ...string) {
	t.Helper()
	for _, n := range names {
		if _, err := exec.LookPath(n); err != nil {
			sandboxtest.Unavailable(t, n, "install "+n)
		}
	}
}

// repoRoot is the top of the git checkout these tests run in.
func repoRoot(t *testing.T) string {
	t.Helper()
	return strings.TrimSpace(tool(t, ".", nil, "git", "rev-parse", "--show-toplevel"))
}

// makeWritable undoes the module cache's read-only files so that the
// test's temporary directory can be removed.
func makeWritable(root string) {
	filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err == nil && d.IsDir() {
			os.Chmod(p, 0o755)
		}
		return nil
	})
}

// TestGoInstallVersion: go install .../cmd/sandbox-run@VERSION gives a
// binary whose `sandbox-run version` is VERSION (the module version the go
// command records; no ldflags stamp). The module is not published, so the
// test serves HEAD as a module proxy from a directory: @v/list, .info,
// .mod, and a zip that `git archive` of HEAD makes in the module zip
// layout (MODULE@VERSION/...), which the go command checks as it extracts
// it. VERSION is HEAD's pseudo-version. The dependencies come from the
// module cache's download directory, itself a proxy, so nothing is
// fetched from the network; the checksum database is off (it is not what
// is tested, and it would need the network).
func TestGoInstallVersion(t *testing.T) {
	need(t, "git", "go")
	root := repoRoot(t)
	fields := strings.Fields(tool(t, root, nil, "git", "log", "-1", "--format=%H %ct", "HEAD"))
	if len(fields) != 2 {
		t.Fatalf("git log: %q", fields)
	}
	sec, err := strconv.ParseInt(fields[1], 10, 64)
	if err != nil {
		t.Fatal(err)
	}
	when := time.Unix(sec, 0).UTC()
	version := "v0.0.0-" + when.Format("20060102150405") + "-" + fields[0][:12]

	tmp := t.TempDir()
	t.Cleanup(func() { makeWritable(tmp) }) // runs before TempDir's removal
	dir := filepath.Join(tmp, "proxy", modulePath, "@v")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	info := `{"Version":"` + version + `","Time":"` + when.Format(time.RFC3339) + `"}`
	files := map[string]string{
		"list":            version + "\n",
		version + ".info": info,
		version + ".mod":  tool(t, root, nil, "git", "show", "HEAD:go.mod"),
	}
	for name, body := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	tool(t, root, nil, "git", "archive", "--format=zip", "--prefix="+modulePath+"@"+version+"/",
		"-o", filepath.Join(dir, version+".zip"), "HEAD")

	cache := strings.TrimSpace(tool(t, root, nil, "go", "env", "GOMODCACHE"))
	gobin := filepath.Join(tmp, "bin")
	env := []string{
		"GOPROXY=file://" + filepath.Join(tmp, "proxy") + ",file://" + filepath.Join(cache, "cache", "download"),
		"GOSUMDB=off",
		"GOMODCACHE=" + filepath.Join(tmp, "mod"),
		"GOBIN=" + gobin,
		"GOFLAGS=-trimpath", // as make build: the build cache serves what it already compiled
		"CGO_ENABLED=0",     // as the README's go install
	}
	tool(t, tmp, env, "go", "install", modulePath+"/cmd/sandbox-run@"+version)
	bin := filepath.Join(gobin, "sandbox-run")
	checkStatic(t, bin)
	if got := tool(t, tmp, nil, bin, "version"); got != "sandbox-run "+version+"\n" {
		t.Errorf("sandbox-run version = %q, want %q", got, "sandbox-run "+version)
	}
	// The go command's own record of the build, read back independently.
	if m := tool(t, tmp, nil, "go", "version", "-m", bin); !strings.Contains(m, "\tmod\t"+modulePath+"\t"+version+"\t") {
		t.Errorf("go version -m: %s; want the main module at %s", m, version)
	}
	t.Logf("go install %s/cmd/sandbox-run@%s: sandbox-run version reports it", modulePath, version)
}

// TestMakeInstall: make install PREFIX=DIR from a fresh clone of HEAD puts
// a binary in DIR/bin that reports the version make stamped into it (git
// describe of the clone), not "dev", and sandbox-run-init beside it, whose
// Go build ID make stamped into sandbox-run.
func TestMakeInstall(t *testing.T) {
	need(t, "git", "go", "make")
	root := repoRoot(t)
	tmp := t.TempDir()
	src := filepath.Join(tmp, "src")
	tool(t, tmp, nil, "git", "clone", "--quiet", "--no-local", root, src)
	want := strings.TrimSpace(tool(t, src, nil, "git", "describe", "--always", "--dirty"))
	if want == "" || strings.HasSuffix(want, "-dirty") {
		t.Fatalf("git describe in the fresh clone: %q, want a clean version", want)
	}
	prefix := filepath.Join(tmp, "prefix")
	tool(t, src, nil, "make", "--no-print-directory", "install", "PREFIX="+prefix)
	fi, err := os.Stat(filepath.Join(prefix, "bin", "sandbox-run"))
	if err != nil || fi.Mode().Perm() != 0o755 {
		t.Fatalf("installed binary: %v %v, want mode 0755", fi, err)
	}
	checkStatic(t, filepath.Join(prefix, "bin", "sandbox-run"))
	if got := tool(t, tmp, nil, filepath.Join(prefix, "bin", "sandbox-run"), "version"); got != "sandbox-run "+want+"\n" {
		t.Errorf("installed sandbox-run version = %q, want %q", got, "sandbox-run "+want)
	}
	// sandbox-run-init beside it, static too, with its build ID stamped
	// into sandbox-run (-trimpath keeps the link flags out of go version
	// -m, so the ID is looked for in the binary's bytes).
	initBin := filepath.Join(prefix, "bin", "sandbox-run-init")
	if fi, err := os.Stat(initBin); err != nil || fi.Mode().Perm() != 0o755 {
		t.Fatalf("installed sandbox-run-init: %v %v, want mode 0755", fi, err)
	}
	checkStatic(t, initBin)
	id := strings.TrimSpace(tool(t, tmp, nil, "go", "tool", "buildid", initBin))
	b, err := os.ReadFile(filepath.Join(prefix, "bin", "sandbox-run"))
	if err != nil {
		t.Fatal(err)
	}
	if strings.Count(id, "/") < 1 || !bytes.Contains(b, []byte(id)) {
		t.Errorf("sandbox-run does not hold sandbox-run-init's build ID %q", id)
	}
	t.Logf("make install PREFIX=%s from a clone of %s: sandbox-run version reports %s", prefix, root, want)
}

// checkStatic fails the test when bin asks for a program interpreter
// (ld.so): make build and the README's go install make a static binary,
// which starts without loading ld.so and libc (see the Makefile's build).
func checkStatic(t *testing.T, bin string) {
	t.Helper()
	dynamic, err := hasInterp(bin)
	if err != nil {
		t.Fatal(err)
	}
	if dynamic {
		t.Errorf("%s is linked dynamically (it has a PT_INTERP program header); want a static binary (CGO_ENABLED=0)", bin)
	}
}

// hasInterp says whether the ELF file bin has a PT_INTERP program header.
func hasInterp(bin string) (bool, error) {
	f, err := elf.Open(bin)
	if err != nil {
		return false, err
	}
	defer f.Close()
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP {
			return true, nil
		}
	}
	return false, nil
}

// TestHasInterpControl: the check tells a dynamically linked program
// (the system's /bin/sh) from a static one.
func TestHasInterpControl(t *testing.T) {
	if dynamic, err := hasInterp("/bin/sh"); err != nil || !dynamic {
		t.Fatalf("hasInterp(/bin/sh) = %v, %v; want true: the control has no interpreter, so checkStatic could not fail", dynamic, err)
	}
}
