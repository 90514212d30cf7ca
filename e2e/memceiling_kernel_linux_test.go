package e2e

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/sandbox-run/sandbox-run/internal/sandboxtest"
	"github.com/sandbox-run/sandbox-run/landlock"
)

// mechanism is one way sandbox-run can run a command here, with the gate
// that skips it (fails under SANDBOX_REQUIRE=1) where it cannot.
type mechanism struct {
	name string
	need func(t *testing.T)
	env  func(t *testing.T) []string
}

func mechanisms() []mechanism {
	none := func(*testing.T) []string { return nil }
	return []mechanism{
		{"bwrap", func(t *testing.T) { sandboxtest.Bwrap(t) }, none},
		{"landlock", func(t *testing.T) { sandboxtest.Landlock(t, landlock.MinABI) }, none},
		{"off", func(*testing.T) {}, none},
		{"gvisor", func(t *testing.T) { sandboxtest.Runsc(t) }, func(t *testing.T) []string { return []string{"TMPDIR=" + gvTmp(t)} }},
	}
}

// ceilingReport is the part of the report these tests read.
type ceilingReport struct {
	OOMScoreAdj *int `json:"oom_score_adj"`
	Limits      []struct {
		Name, Value, Enforced, Source string
	} `json:"limits"`
	Exit struct {
		Class string `json:"class"`
	} `json:"exit"`
}

func (r ceilingReport) limit(name string) (value, enforced, source string) {
	for _, l := range r.Limits {
		if l.Name == name {
			return l.Value, l.Enforced, l.Source
		}
	}
	return "", "", ""
}

// runMechanism runs sh -c script under mechanism m with extra flags and a
// report.
func runMechanism(t *testing.T, m mechanism, script string, extra ...string) (ceilingReport, result) {
	t.Helper()
	rep := filepath.Join(sandboxtest.WorkDir(t), "r.json")
	args := append([]string{"run", "--workdir", sandboxtest.WorkDir(t), "--sandbox", m.name, "--report", rep}, extra...)
	r := runEnv(t, m.env(t), "", append(args, "--", "sh", "-c", script)...)
	var out ceilingReport
	b, err := os.ReadFile(rep)
	if err == nil {
		err = json.Unmarshal(b, &out)
	}
	if err != nil {
		t.Fatalf("no report: %v (exit %d, %q)", err, r.code, r.stderr)
	}
	return out, r
}

// halfHostMemory is the documented default ceiling, computed here from
// /proc/meminfo rather than by the code under test: half of MemTotal,
// rounded down to 64 MiB.
func halfHostMemory(t *testing.T) int64 {
	t.Helper()
	f, err := os.Open("/proc/meminfo")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	s := bufio.NewScanner(f)
	for s.Scan() {
		if v, ok := strings.CutPrefix(s.Text(), "MemTotal:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
			if err != nil {
				t.Fatal(err)
			}
			return kb << 10 / 2 / (64 << 20) * (64 << 20)
		}
	}
	t.Fatal("no MemTotal")
	return 0
}

// TestDefaultMemoryCeiling: on every mechanism a run without --memory has
// a memory ceiling, half the host's memory, named in the report with its
// source and how it is held (gvisor: "sampled"), and the command's
// oom_score_adj is 1000, read inside and in the report. --memory SIZE is
// the policy's; --memory none lists the ceiling as none. Control: the
// test's own oom_score_adj is below 1000, so the 1000 is the sandbox's.
func TestDefaultMemoryCeiling(t *testing.T) {
	own, err := os.ReadFile("/proc/self/oom_score_adj")
	if err != nil || strings.TrimSpace(string(own)) == "1000" {
		t.Fatalf("untested: the test's own oom_score_adj is %q (%v), the sandbox's would not differ", own, err)
	}
	want := strconv.FormatInt(halfHostMemory(t), 10)
	for _, m := range mechanisms() {
		t.Run(m.name, func(t *testing.T) {
			m.need(t)
			rep, r := runMechanism(t, m, "cat /proc/self/oom_score_adj")
			if r.code != 0 || strings.TrimSpace(r.stdout) != "1000" {
				t.Errorf("inside, oom_score_adj is %q (exit %d, %q), want 1000", r.stdout, r.code, r.stderr)
			}
			if rep.OOMScoreAdj == nil || *rep.OOMScoreAdj != 1000 {
				t.Errorf("report's oom_score_adj %v, want 1000 read back", rep.OOMScoreAdj)
			}
			v, how, src := rep.limit("memory")
			held := how == "cgroup" || how == "sampled"
			if m.name == "gvisor" {
				held = how == "sampled" // runsc's process tree, sampled
			}
			if v != want || src != "default" || !held {
				t.Errorf("report's memory: %q by %q from %q, want %s (half the host's memory), held, from default", v, how, src, want)
			}
			rep, _ = runMechanism(t, m, "true", "--memory", "none")
			if v, how, src := rep.limit("memory"); v != "none" || how != "none" || src != "policy" {
				t.Errorf("--memory none: report's memory %q by %q from %q, want none by none from policy", v, how, src)
			}
			rep, _ = runMechanism(t, m, "true", "--memory", "512M")
			if v, _, src := rep.limit("memory"); v != strconv.Itoa(512<<20) || src != "policy" {
				t.Errorf("--memory 512M: report's memory %q from %q, want %d from policy", v, src, 512<<20)
			}
		})
	}
}

// hoardScript writes 1 GiB, 16 MiB at a time, into memory no process
// maps, then prints "wrote 1024". where: memfd (memfd_create), shm (a
// POSIX shared memory file in /dev/shm) or tmp (a file in /tmp); the
// files are unlinked at once, held by their descriptor only, so nothing
// is left in a host directory.
func hoardScript(where string) string {
	open := map[string]string{
		"memfd": `fd = os.memfd_create("hoard")`,
		"shm":   `p = "/dev/shm/sbx-hoard-%d" % os.getpid(); fd = os.open(p, os.O_CREAT | os.O_EXCL | os.O_RDWR, 0o600); os.unlink(p)`,
		"tmp":   `p = "/tmp/sbx-hoard-%d" % os.getpid(); fd = os.open(p, os.O_CREAT | os.O_EXCL | os.O_RDWR, 0o600); os.unlink(p)`,
	}[where]
	return `import os
` + open + `
chunk = b"\1" * (16 << 20)
for i in range(64):
    os.write(fd, chunk)
print("wrote", os.fstat(fd).st_blocks * 512 >> 20, flush=True)
`
}

// TestSharedMemoryCountsUnderMemory: with --memory 256M a command that
// writes 1 GiB into a memfd it never maps, into a POSIX shared memory
// object, or (bwrap and gvisor, whose /tmp is their own tmpfs) into /tmp,
// is ended as over the memory limit, on every mechanism that samples
// memory here.
// Control: unconfined, the same program writes the whole 1 GiB and exits
// 0. At most about 1 GiB is held at a time, and freed at once.
func TestSharedMemoryCountsUnderMemory(t *testing.T) {
	for _, where := range []string{"memfd", "shm", "tmp"} {
		t.Run("control/"+where, func(t *testing.T) {
			out, err := exec.Command("python3", "-c", hoardScript(where)).CombinedOutput()
			if err != nil || strings.TrimSpace(string(out)) != "wrote 1024" {
				t.Fatalf("untested: unconfined the program did not write 1 GiB: %q, %v", out, err)
			}
		})
	}
	for _, m := range mechanisms() {
		for _, where := range []string{"memfd", "shm", "tmp"} {
			if where == "tmp" && m.name != "bwrap" && m.name != "gvisor" || where == "shm" && m.name == "landlock" {
				// The host's /tmp is not the sandbox's memory (gVisor's
				// /tmp is, in runsc's memory file); Landlock gives no
				// access to the host's /dev/shm at all.
				continue
			}
			t.Run(m.name+"/"+where, func(t *testing.T) {
				m.need(t)
				// Room for the 1 GiB in bwrap's /dev/shm and /tmp, so
				// that the memory ceiling, not the tmpfs's, is what holds.
				rep, r := runMechanism(t, m, "exec python3 -c '"+hoardScript(where)+"'",
					"--memory", "256M", "--shm-size", "2G", "--tmp-size", "2G")
				_, how, _ := rep.limit("memory")
				if r.code != 137 || rep.Exit.Class != "memory_limit" || strings.Contains(r.stdout, "wrote") {
					t.Fatalf("memory %s: exit %d, class %q, out %q, want 137 memory_limit before the 1 GiB (%q)", how, r.code, rep.Exit.Class, r.stdout, r.stderr)
				}
				t.Logf("ended by the memory limit, held by %s: %s", how, strings.TrimSpace(r.stderr))
			})
		}
	}
}

// TestMemoryLimitEveryMechanism: a command that allocates 384 MiB of
// ordinary memory under --memory 128M is ended and classified as the
// memory limit on every mechanism. Controls: unconfined, and under the
// same mechanism with --memory none, it allocates that much and exits 0;
// and 64 MiB under --memory 256M is not ended (a measure that counted
// the command's memory several times over would end it; the memory file
// counted twice where mapped is pinned by the limits package's
// TestSampleGVisorCountsMemoryFileOnce, since under the ptrace platform
// runsc maps little of it and this run would not tell).
func TestMemoryLimitEveryMechanism(t *testing.T) {
	// 8 MiB at a time: one allocation past the per-process RLIMIT_DATA
	// backstop would fail in the program (MemoryError), not end it.
	prog := func(n int) string {
		return fmt.Sprintf(`a = [bytearray(8 << 20) for i in range(%d)]; print("held", sum(map(len, a)) >> 20, flush=True)`, n/8)
	}
	if out, err := exec.Command("python3", "-c", prog(384)).CombinedOutput(); err != nil || strings.TrimSpace(string(out)) != "held 384" {
		t.Fatalf("untested: unconfined the program did not allocate 384 MiB: %q, %v", out, err)
	}
	for _, m := range mechanisms() {
		t.Run(m.name, func(t *testing.T) {
			m.need(t)
			_, r := runMechanism(t, m, "exec python3 -c '"+prog(384)+"'", "--memory", "none")
			if r.code != 0 || strings.TrimSpace(r.stdout) != "held 384" {
				t.Fatalf("untested: with --memory none the program did not allocate 384 MiB: exit %d, out %q (%q)", r.code, r.stdout, r.stderr)
			}
			rep, r := runMechanism(t, m, "exec python3 -c '"+prog(384)+"'", "--memory", "128M")
			if r.code != 137 || rep.Exit.Class != "memory_limit" || strings.Contains(r.stdout, "held") {
				t.Errorf("384 MiB under --memory 128M: exit %d, class %q, out %q, want 137 memory_limit (%q)", r.code, rep.Exit.Class, r.stdout, r.stderr)
			}
			rep, r = runMechanism(t, m, "exec python3 -c '"+prog(64)+"'", "--memory", "256M")
			if r.code != 0 || strings.TrimSpace(r.stdout) != "held 64" {
				t.Errorf("64 MiB under --memory 256M: exit %d, class %q, out %q, want 0 (%q)", r.code, rep.Exit.Class, r.stdout, r.stderr)
			}
		})
	}
}

// inotifyScript makes inotify instances until the kernel refuses one or
// it has made max, prints "made N errno E" (E 0 when none was refused),
// and, with hold, keeps them for up to 30 s, until its stdin closes.
func inotifyScript(max int, hold bool) string {
	s := `import ctypes, sys
libc = ctypes.CDLL(None, use_errno=True)
n, e = 0, 0
while n < ` + strconv.Itoa(max) + `:
    if libc.inotify_init() < 0:
        e = ctypes.get_errno()
        break
    n += 1
print("made", n, "errno", e, flush=True)
`
	if hold {
		s += `import select
select.select([sys.stdin], [], [], 30)
`
	}
	return s
}

// TestInotifyCeiling: under bwrap, on the fast path and on init's, a run
// can make no more inotify instances than the ceiling its report names
// (EMFILE at it), and while a run holds every instance it may, the user
// the sandbox runs as can still make one on the host. Control: unconfined
// the same program makes more than the ceiling. The command makes its
// instances at once: both paths hold the command at its gate until the
// ceiling is set. Landlock and tier 0,
// without a user namespace of their own, name the ceiling as not held.
func TestInotifyCeiling(t *testing.T) {
	needBwrap(t)
	m := mechanisms()[0]
	rep, r := runMechanism(t, m, "true")
	v, how, src := rep.limit("inotify_instances")
	ceiling, err := strconv.Atoi(v)
	if err != nil || how != "userns" || src != "default" || r.code != 0 {
		t.Fatalf("report's inotify_instances %q by %q from %q (exit %d, %q), want a number held by userns from default", v, how, src, r.code, r.stderr)
	}
	ctl := exec.Command("/usr/bin/python3", "-c", inotifyScript(ceiling+8, false))
	ctl.SysProcAttr = sandboxtest.AsSandboxUser()
	if out, err := ctl.Output(); err != nil || !strings.HasPrefix(string(out), fmt.Sprintf("made %d ", ceiling+8)) {
		t.Fatalf("untested: unconfined the program did not make %d instances: %q, %v", ceiling+8, out, err)
	}
	for _, path := range []struct {
		name  string
		extra []string
	}{{"fast", nil}, {"init", []string{"--allow-host", "example.com"}}} {
		t.Run(path.name, func(t *testing.T) {
			args := append([]string{"run", "--workdir", sandboxtest.WorkDir(t)}, path.extra...)
			c := exec.Command(bin, append(args, "--", "python3", "-c", inotifyScript(ceiling+8, true))...)
			stdin, _ := c.StdinPipe()
			stdout, _ := c.StdoutPipe()
			if err := c.Start(); err != nil {
				t.Fatal(err)
			}
			defer func() { stdin.Close(); c.Wait() }()
			line, _ := bufio.NewReader(stdout).ReadString('\n')
			if want := fmt.Sprintf("made %d errno 24", ceiling); strings.TrimSpace(line) != want {
				t.Fatalf("inside: %q, want %q (EMFILE at the ceiling)", line, want)
			}
			host := exec.Command("/usr/bin/python3", "-c", inotifyScript(1, false))
			host.SysProcAttr = sandboxtest.AsSandboxUser()
			if out, err := host.Output(); err != nil || !strings.HasPrefix(string(out), "made 1 ") {
				t.Errorf("while the run holds its ceiling, the sandbox's user cannot make an instance on the host: %q, %v", out, err)
			}
		})
	}
	for _, m := range mechanisms()[1:3] {
		t.Run(m.name, func(t *testing.T) {
			m.need(t)
			rep, _ := runMechanism(t, m, "true")
			if v, how, _ := rep.limit("inotify_instances"); v != "none" || how != "none" {
				t.Errorf("report's inotify_instances %q by %q, want none: %s has no user namespace to hold it", v, how, m.name)
			}
		})
	}
}
