package limits

import (
	"bufio"
	"context"
	"errors"
	"io/fs"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/sandbox-run/sandbox-run/internal/sandboxtest"
	"golang.org/x/sys/unix"
)

// spread starts count processes of mb MiB each under one parent and
// returns the parent once all hold their memory.
func spread(t *testing.T, count, mb int) *child {
	t.Helper()
	c := start(t, "spread", []string{countEnv + "=" + strconv.Itoa(count), mbEnv + "=" + strconv.Itoa(mb)}, nil)
	if l := c.line(t); l != "ready" {
		t.Fatalf("spread: %q", l)
	}
	return c
}

func TestSampleMemorySpreadOverProcesses(t *testing.T) {
	const limit = 100 << 20
	// Four processes of 40 MiB: each under the limit, together over it.
	c := spread(t, 4, 40)
	u, err := SampleOnce(c.cmd.Process.Pid, false)
	if err != nil {
		t.Fatal(err)
	}
	if u.Procs != 5 || u.Memory < 160<<20 {
		t.Fatalf("SampleOnce = %+v, want 5 processes and at least 160 MiB", u)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	ch, err := Sample(ctx, c.cmd.Process.Pid, Limits{Memory: limit}, nil)
	if err != nil {
		t.Fatal(err)
	}
	x, ok := receive(t, ch, 5*time.Second)
	if !ok || x.Kind != MemoryLimit || x.Limit != limit || x.Usage <= limit {
		t.Fatalf("Sample sent %+v (ok %v), want memory_limit over %d", x, ok, limit)
	}
	t.Logf("exceeded: %v (PSS)", x)
	if _, open := <-ch; open {
		t.Fatal("channel not closed after Exceeded")
	}
}

// TestSampleGVisorCountsMemoryFileOnce: a process that holds and maps a
// 64 MiB memfd, as runsc's sandbox process does its memory file, counts
// it once under SampleGVisor's measure (anonymous memory plus what is
// held). Control: Sample's measure, resident shmem plus what is held,
// counts it twice.
func TestSampleGVisorCountsMemoryFileOnce(t *testing.T) {
	c := start(t, "memfd-map", []string{mbEnv + "=64"}, nil)
	if l := c.line(t); l != "ready" {
		t.Fatalf("memfd-map: %q", l)
	}
	pid := c.cmd.Process.Pid
	for _, confirm := range []bool{false, true} { // RSS, then PSS
		l := Limits{Memory: 1 << 40}
		if confirm {
			l.Memory = 1
		}
		naive := walker{root: pid}
		if u := naive.sample(l); u.Memory < 128<<20 {
			t.Fatalf("untested: Sample's measure (pss %v) counts %d MiB, not the memfd twice", confirm, u.Memory>>20)
		}
		gv := walker{root: pid, anonOnly: true}
		if u := gv.sample(l); u.Memory < 64<<20 || u.Memory >= 96<<20 {
			t.Errorf("SampleGVisor's measure (pss %v) counts %d MiB (held %d MiB), want the 64 MiB memfd once", confirm, u.Memory>>20, u.Held>>20)
		}
	}
}

func TestSampleUnderLimitIsQuiet(t *testing.T) {
	// Negative control: four processes of 8 MiB stay under 200 MiB.
	c := spread(t, 4, 8)
	ctx, cancel := context.WithCancel(context.Background())
	ch, err := Sample(ctx, c.cmd.Process.Pid, Limits{Memory: 200 << 20, Pids: 1000, CPUTime: time.Minute}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if x, ok := receive(t, ch, 500*time.Millisecond); ok {
		t.Fatalf("Sample sent %+v for a tree under its limits", x)
	}
	cancel()
	if _, ok := receive(t, ch, time.Second); ok {
		t.Fatal("Sample sent after cancel")
	}
}

func TestSampleMemoryHogStoppedBeforeTwiceTheLimit(t *testing.T) {
	const limit = 128 << 20
	// Bounded: the hog stops allocating at 1 GiB.
	c := start(t, "hog", []string{mbEnv + "=1024"}, nil)
	ch, err := Sample(context.Background(), c.cmd.Process.Pid, Limits{Memory: limit}, nil)
	if err != nil {
		t.Fatal(err)
	}
	x, ok := receive(t, ch, 10*time.Second)
	if !ok || x.Kind != MemoryLimit {
		t.Fatalf("Sample sent %+v (ok %v), want memory_limit", x, ok)
	}
	c.stop(t) // what the launcher does on Exceeded
	if x.Usage >= 2*limit {
		t.Fatalf("hog seen at %d bytes, not before twice the limit (%d)", x.Usage, 2*limit)
	}
	t.Logf("exceeded: %v", x)
}

func TestSamplePidsForkBomb(t *testing.T) {
	sandboxtest.ProcessCount(t)
	const limit = 30
	// At most 2^(6+2) processes, each gone after 5 s.
	c := start(t, "", nil, nil, bomb(6)...)
	if l := c.line(t); l != "ready" {
		t.Fatalf("bomb: %q", l)
	}
	ch, err := Sample(context.Background(), c.cmd.Process.Pid, Limits{Pids: limit}, nil)
	if err != nil {
		t.Fatal(err)
	}
	x, ok := receive(t, ch, 10*time.Second)
	if !ok || x.Kind != PidsLimit || x.Usage <= limit {
		t.Fatalf("Sample sent %+v (ok %v), want pids_limit over %d", x, ok, limit)
	}
	t.Logf("exceeded: %v", x)
}

func TestSampleCPUOverTheTree(t *testing.T) {
	c := start(t, "spin", nil, nil)
	ch, err := Sample(context.Background(), c.cmd.Process.Pid, Limits{CPUTime: 300 * time.Millisecond}, nil)
	if err != nil {
		t.Fatal(err)
	}
	x, ok := receive(t, ch, 5*time.Second)
	if !ok || x.Kind != CpuLimit || time.Duration(x.Usage) <= 300*time.Millisecond {
		t.Fatalf("Sample sent %+v (ok %v), want cpu_limit", x, ok)
	}
}

func TestSampleEndsWithRoot(t *testing.T) {
	c := start(t, "", nil, nil, "/bin/sh", "-c", "echo ready; read x")
	if l := c.line(t); l != "ready" {
		t.Fatalf("sh: %q", l)
	}
	ch, err := Sample(context.Background(), c.cmd.Process.Pid, Limits{Memory: 1 << 30}, nil)
	if err != nil {
		t.Fatal(err)
	}
	c.stop(t) // killed and reaped: its pid is gone
	if x, ok := receive(t, ch, 2*time.Second); ok {
		t.Fatalf("Sample sent %+v", x)
	}
	select {
	case _, open := <-ch:
		if open {
			t.Fatal("channel still open")
		}
	case <-time.After(2 * time.Second):
		t.Fatal("channel not closed 2 s after the root was reaped")
	}
	if _, err := Sample(context.Background(), c.cmd.Process.Pid, Limits{}, nil); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("Sample of a reaped pid: %v, want fs.ErrNotExist", err)
	}
}

// TestTree: the tree below a shell with two children, its pid first and
// its children next, and the same tree from the scan of every process's
// parent that kernels without CONFIG_PROC_CHILDREN get.
func TestTree(t *testing.T) {
	c := exec.Command("sh", "-c", "sleep 30 & sleep 30 & echo started; wait")
	out, err := c.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() {
		for _, p := range Tree(c.Process.Pid)[1:] {
			syscall.Kill(p, syscall.SIGKILL)
		}
		c.Process.Kill()
		c.Wait()
	}()
	if _, err := bufio.NewReader(out).ReadString('\n'); err != nil {
		t.Fatal(err)
	}
	got := Tree(c.Process.Pid)
	if len(got) != 3 || got[0] != c.Process.Pid {
		t.Fatalf("Tree(%d) = %v, want the shell and its two sleeps", c.Process.Pid, got)
	}
	w := walker{root: c.Process.Pid, scan: true}
	w.walk()
	scanned := slices.Clone(w.procs)
	slices.Sort(scanned[1:])
	slices.Sort(got[1:])
	if !slices.Equal(scanned, got) {
		t.Errorf("by scan %v, by children files %v: want the same tree", scanned, got)
	}
	if g := Tree(1 << 30); len(g) != 1 {
		t.Errorf("Tree of a pid that is not there = %v, want only itself", g)
	}
}

// BenchmarkSample measures one sample of this test's own process tree
// with a memory limit (what Sample does on each tick): the system calls
// per sample are what it costs.
func BenchmarkSample(b *testing.B) {
	w := walker{root: os.Getpid(), tmpfs: []string{"/tmp", "/dev/shm"}}
	l := Limits{Memory: 1 << 50, Pids: 1 << 20}
	for b.Loop() {
		if u := w.sample(l); u.Procs < 1 {
			b.Fatal("no process sampled")
		}
	}
}

// TestHeldSkipsTheHostsTmpfs: while bwrap sets the sandbox up, its PID 1
// still sees the host's /dev/shm at the path the sandbox's own will take;
// what the host keeps there is not the sandbox's memory. This test's own
// process stands for that PID 1: it sees the host's /dev/shm. Control: a
// walker that does not know the host's devices counts the file, so the
// test can fail.
func TestHeldSkipsTheHostsTmpfs(t *testing.T) {
	var st unix.Statfs_t
	if unix.Statfs("/dev/shm", &st) != nil || st.Type != unix.TMPFS_MAGIC {
		sandboxtest.Unavailable(t, "a tmpfs at /dev/shm", "mount one (every Linux distribution has it)")
	}
	f, err := os.CreateTemp("/dev/shm", "sbx-held-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.Remove(f.Name()) })
	const size = 8 << 20
	_, err = f.Write(make([]byte, size))
	// Closed: an object the tree holds open is its own to count, by
	// descriptor, wherever it lives.
	if cerr := f.Close(); err != nil || cerr != nil {
		t.Fatal(err, cerr)
	}
	paths := []string{"/dev/shm"}
	naive := walker{root: os.Getpid(), tmpfs: paths}
	naive.walk()
	if got := naive.held(); got < size {
		t.Fatalf("control: without the host's devices the walker counts %d bytes, want at least %d (untested)", got, size)
	}
	w := walker{root: os.Getpid(), tmpfs: paths, hostDevs: devices(paths)}
	w.walk()
	if got := w.held(); got >= size {
		t.Errorf("the host's /dev/shm counted as the tree's: %d bytes held", got)
	}
}

// TestNearest: the sampler's pace follows whichever limit is nearest, CPU
// time included (a CPU budget nearly spent is sampled fast, though memory
// and tasks are far from theirs).
func TestNearest(t *testing.T) {
	for _, tc := range []struct {
		u            Usage
		l            Limits
		wantU, wantL int64
	}{
		{Usage{}, Limits{}, 0, 0},
		{Usage{Memory: 10, Tasks: 9}, Limits{Memory: 100, Pids: 10}, 9, 10},
		{Usage{Memory: 90, Tasks: 1}, Limits{Memory: 100, Pids: 10}, 90, 100},
		{Usage{Memory: 1, CPU: 900 * time.Millisecond}, Limits{Memory: 100, CPUTime: time.Second}, int64(900 * time.Millisecond), int64(time.Second)},
		{Usage{Memory: 50, CPU: time.Millisecond}, Limits{Memory: 100, CPUTime: time.Second}, 50, 100},
	} {
		if u, l := nearest(tc.u, tc.l); u != tc.wantU || l != tc.wantL {
			t.Errorf("nearest(%+v, %+v) = %d, %d; want %d, %d", tc.u, tc.l, u, l, tc.wantU, tc.wantL)
		}
	}
}
