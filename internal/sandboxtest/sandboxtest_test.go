package sandboxtest

import (
	"os"
	"path/filepath"
	"testing"
)

func TestPrivateUserDirs(t *testing.T) {
	vars := []string{"XDG_CACHE_HOME", "XDG_STATE_HOME", "XDG_CONFIG_HOME"}
	for _, v := range vars {
		t.Setenv(v, "/nonexistent/"+v) // restored when the test ends
	}
	cleanup, err := PrivateUserDirs("sbx-sandboxtest-")
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	for _, v := range vars {
		d := os.Getenv(v)
		fi, err := os.Stat(d)
		if err != nil || !fi.IsDir() || fi.Mode().Perm() != 0o700 {
			t.Errorf("%s=%s: %v %v, want a new 0700 directory", v, d, fi, err)
		}
		seen[filepath.Dir(d)] = true
	}
	if len(seen) != 1 {
		t.Errorf("the directories do not share one parent: %v", seen)
	}
	cleanup()
	for parent := range seen {
		if _, err := os.Stat(parent); !os.IsNotExist(err) {
			t.Errorf("cleanup left %s: %v", parent, err)
		}
	}
}

func TestBuildSandboxRunCopiesPrebuilt(t *testing.T) {
	src := filepath.Join(t.TempDir(), "prebuilt")
	if err := os.WriteFile(src, []byte("#!/bin/sh\n"), 0o700); err != nil {
		t.Fatal(err)
	}
	t.Setenv(BinEnv, src)
	bin, cleanup, err := BuildSandboxRun("sbx-sandboxtest-bin-")
	if err != nil {
		t.Fatal(err)
	}
	defer cleanup()
	b, err := os.ReadFile(bin)
	fi, _ := os.Stat(bin)
	if err != nil || string(b) != "#!/bin/sh\n" || fi.Mode().Perm() != 0o755 {
		t.Errorf("copied binary %s: %q %v, want the prebuilt one, mode 0755", bin, b, err)
	}
	t.Setenv(BinEnv, filepath.Join(t.TempDir(), "missing"))
	if _, _, err := BuildSandboxRun("sbx-sandboxtest-bin-"); err == nil {
		t.Errorf("a missing %s was accepted", BinEnv)
	}
}
