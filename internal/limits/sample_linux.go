package limits

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"
)

// userHZ is the unit of the CPU times in /proc/PID/stat: USER_HZ, 100 on
// every Linux architecture (it is ABI, independent of the kernel's HZ).
const userHZ = 100

// maxTree bounds one walk of the process tree, so that a walk over a tree
// that changes under it always ends.
const maxTree = 1 << 16

// maxSampleLoad paces Sample: the wait after a sample is at least this
// many times what the sample took, so that sampling a large tree takes at
// most a fifth of a CPU.
const maxSampleLoad = 4

// maxFDs bounds the descriptors of one process a sample looks at for
// shared memory it holds (Usage.Held).
const maxFDs = 1 << 16

// Usage is one sample of a process tree.
type Usage struct {
	// Memory is the sum over the tree of resident anonymous and shmem
	// memory (RssAnon + RssShmem of /proc/PID/status), in bytes. When that
	// sum is above the memory limit it is recomputed as the proportional
	// set size (Pss_Anon + Pss_Shmem of smaps_rollup), which counts a page
	// shared by n processes once in total rather than n times. Added to
	// either: Held.
	Memory int64
	// Held is the part of Memory in shared memory that no process needs
	// to map: the pages of every memfd and POSIX shared memory object
	// (/dev/shm) a process of the tree holds a descriptor of, each
	// counted once, and what the tmpfs file systems Sample was given hold.
	Held int64
	// Tasks is the number of tasks (threads) in the tree, zombies included.
	Tasks int64
	// CPU is user plus system time of the live processes and of the
	// children they reaped.
	CPU time.Duration
	// Procs is the number of processes in the tree.
	Procs int
}

// Sample watches the process tree below rootPID (rootPID included) and
// sends one Exceeded on the returned channel when the tree is over
// l.Memory, l.Pids or l.CPUTime (checked in that order; zero fields are
// not checked). It is the fallback for a sandbox without a cgroup: the
// caller ends the whole sandbox when it receives. The channel is closed
// after that send, when ctx is done, or when rootPID has exited (or its pid
// was reused: the process's start time is checked on every sample).
//
// interval picks the wait before each next sample from the usage closest
// to its limit; nil means DefaultInterval (50 ms under a 64th of the
// limit, 10 ms from there, 1 ms from half of it).
// The wait is never less than maxSampleLoad times what the sample took.
//
// The tree is followed through /proc/PID/task/TID/children; an orphan
// reparented to a process outside the tree (no PID namespace, no
// subreaper) is lost to it. It returns an error wrapping fs.ErrNotExist if
// rootPID does not exist.
//
// Memory counts shared memory no process maps too (Usage.Held): every
// memfd and /dev/shm object a process of the tree holds open, and the
// used space of each tmpfs in tmpfs, a path as rootPID sees it (its
// /proc/PID/root; one that is not a tmpfs there is skipped). Pass the
// sandbox's private /tmp and /dev/shm; a /dev/shm listed there is not
// counted again by descriptor.
func Sample(ctx context.Context, rootPID int, l Limits, interval IntervalFunc, tmpfs ...string) (<-chan Exceeded, error) {
	return sample(ctx, walker{root: rootPID, tmpfs: tmpfs, hostDevs: devices(tmpfs)}, l, interval)
}

// devices are the devices of paths as this process sees them (0 for one
// it cannot stat): a file system rootPID sees at the same path on the same
// device is this host's, not the sandbox's own.
func devices(paths []string) []uint64 {
	devs := make([]uint64, len(paths))
	for i, p := range paths {
		var st unix.Stat_t
		if unix.Stat(p, &st) == nil {
			devs[i] = st.Dev
		}
	}
	return devs
}

// SampleGVisor is Sample for runsc's process tree (runsc run, its gofer
// and its sandbox, the Sentry, with the stubs of its platform): all the
// memory of the sandboxed program is in one memfd, the Sentry's memory
// file, which the Sentry holds open and which the Sentry and the stubs
// map in part. So shared memory is counted once, by descriptor (the
// allocated pages of each memfd the tree holds, Usage.Held), and
// resident memory is anonymous memory only (RssAnon, or Pss_Anon above the
// limit): adding RssShmem or Pss_Shmem would count the memory file's
// mapped pages twice, and PSS alone misses the pages the Sentry does not
// keep mapped (most of them: a program's 300 MiB showed as about 20 MiB
// of PSS and 307 MiB of the memory file). No tmpfs is counted by path:
// gVisor's own tmpfs lives in the memory file.
func SampleGVisor(ctx context.Context, rootPID int, l Limits, interval IntervalFunc) (<-chan Exceeded, error) {
	return sample(ctx, walker{root: rootPID, anonOnly: true}, l, interval)
}

// sample is Sample and SampleGVisor, measuring with w.
func sample(ctx context.Context, w walker, l Limits, interval IntervalFunc) (<-chan Exceeded, error) {
	rootPID := w.root
	if err := l.Validate(); err != nil {
		return nil, err
	}
	if interval == nil {
		interval = DefaultInterval
	}
	start, err := startTime(rootPID)
	if err != nil {
		return nil, fmt.Errorf("limits: sample %d: %w", rootPID, err)
	}
	out := make(chan Exceeded, 1)
	go func() {
		defer close(out)
		t := time.NewTimer(0)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			}
			if st, err := w.startTime(); err != nil || st != start {
				return
			}
			began := time.Now()
			u := w.sample(l)
			if x, ok := over(u, l); ok {
				out <- x
				return
			}
			// At most a fifth of a CPU: a tree of thousands of
			// processes is sampled less often, not at any cost.
			t.Reset(max(interval(nearest(u, l)), maxSampleLoad*time.Since(began)))
		}
	}()
	return out, nil
}

// over compares u with l.
func over(u Usage, l Limits) (Exceeded, bool) {
	switch {
	case l.Memory > 0 && u.Memory > l.Memory:
		return Exceeded{Kind: MemoryLimit, Usage: u.Memory, Limit: l.Memory}, true
	case l.Pids > 0 && u.Tasks > l.Pids:
		return Exceeded{Kind: PidsLimit, Usage: u.Tasks, Limit: l.Pids}, true
	case l.CPUTime > 0 && u.CPU > l.CPUTime:
		return Exceeded{Kind: CpuLimit, Usage: int64(u.CPU), Limit: int64(l.CPUTime)}, true
	}
	return Exceeded{}, false
}

// nearest returns the (usage, limit) pair of memory, tasks or CPU time
// that is the largest fraction of its limit, (0, 0) if none is limited.
func nearest(u Usage, l Limits) (int64, int64) {
	var bu, bl int64
	best := -1.0
	for _, c := range [][2]int64{{u.Memory, l.Memory}, {u.Tasks, l.Pids}, {int64(u.CPU), int64(l.CPUTime)}} {
		if c[1] > 0 && float64(c[0])/float64(c[1]) > best {
			bu, bl, best = c[0], c[1], float64(c[0])/float64(c[1])
		}
	}
	return bu, bl
}

// SampleOnce measures the tree below rootPID once, with memory as RSS
// (anonymous + shmem) unless confirm is true, in which case it is PSS.
// It is what Sample does on each tick, exposed for reports and tests.
func SampleOnce(rootPID int, confirm bool) (Usage, error) {
	if _, err := startTime(rootPID); err != nil {
		return Usage{}, fmt.Errorf("limits: sample %d: %w", rootPID, err)
	}
	w := walker{root: rootPID}
	l := Limits{CPUTime: 1}
	if confirm {
		l.Memory = 1 // anything above is "over", so PSS is read
	}
	return w.sample(l), nil
}

// Tree returns the process tree below pid as the host's /proc shows it:
// pid first, then its children, then theirs (breadth first), through
// /proc/PID/task/TID/children or, on a kernel without
// CONFIG_PROC_CHILDREN, a scan of every process's parent. It holds at
// most 65,536 pids; a pid that is gone has no children.
func Tree(pid int) []int {
	w := walker{root: pid}
	w.walk()
	return w.procs
}

type walker struct {
	root  int
	procs []int
	buf   []byte
	// tmpfs are the paths, inside root's mount namespace, of the tmpfs
	// file systems whose use counts as the tree's memory.
	tmpfs []string
	// hostDevs are the devices of tmpfs's paths as sandbox-run sees
	// them: until the sandbox has mounted its own (while bwrap sets it
	// up), root sees the host's there, which is not the tree's to count.
	hostDevs []uint64
	// scan is set once /proc/PID/task/TID/children is found missing
	// (CONFIG_PROC_CHILDREN=n): the tree is then built from every
	// process's parent pid.
	scan bool
	// anonOnly leaves shmem out of resident memory (SampleGVisor): the
	// tree's shared memory is counted by the descriptors held (held).
	anonOnly bool
	dents    []byte // getdents' buffer (names)
}

// sample walks the tree and measures it; l decides what is read.
func (w *walker) sample(l Limits) Usage {
	w.walk()
	var u Usage
	u.Procs = len(w.procs)
	for _, p := range w.procs {
		mem, tasks := w.status(p)
		u.Memory += mem
		u.Tasks += tasks
		if l.CPUTime > 0 {
			u.CPU += w.cpu(p)
		}
	}
	if l.Memory > 0 {
		u.Held = w.held()
		u.Memory += u.Held
	}
	if l.Memory > 0 && u.Memory > l.Memory {
		// RSS counts a page once per process mapping it; PSS splits it.
		// RSS >= PSS, so checking PSS only above the limit misses nothing.
		var pss int64
		for _, p := range w.procs {
			v, ok := w.pss(p)
			if !ok {
				mem, _ := w.status(p)
				v = mem // unreadable: keep the larger, RSS
			}
			pss += v
		}
		u.Memory = pss + u.Held
	}
	return u
}

// held is the shared memory the tree holds without mapping it: the used
// space of each tmpfs of w.tmpfs, and the allocated pages of each memfd
// and /dev/shm object a process holds a descriptor of, once per object.
// A page that is also mapped counts in RSS too: the sum errs towards the
// limit, never away from it.
func (w *walker) held() int64 {
	var sum int64
	countShm := true
	prefix := "/proc/" + strconv.Itoa(w.root) + "/root"
	for i, t := range w.tmpfs {
		var st unix.Statfs_t
		if unix.Statfs(prefix+t, &st) != nil || st.Type != unix.TMPFS_MAGIC || w.hostFS(i, prefix+t) {
			continue
		}
		sum += int64(st.Blocks-st.Bfree) * st.Bsize
		if t == "/dev/shm" {
			countShm = false
		}
	}
	seen := map[[2]uint64]bool{}
	for _, p := range w.procs {
		sum += w.heldByFD(p, countShm, seen)
	}
	return sum
}

// hostFS says whether path (w.tmpfs[i] as root sees it) is the host's
// file system at that path, not one of the sandbox's own.
func (w *walker) hostFS(i int, path string) bool {
	if i >= len(w.hostDevs) || w.hostDevs[i] == 0 {
		return false
	}
	var st unix.Stat_t
	return unix.Stat(path, &st) != nil || st.Dev == w.hostDevs[i]
}

// heldByFD sums the allocated size of the memfds (and, with shm, the
// /dev/shm objects) that p holds descriptors of and seen does not name
// yet, adding them to seen.
func (w *walker) heldByFD(p int, shm bool, seen map[[2]uint64]bool) int64 {
	dir := "/proc/" + strconv.Itoa(p) + "/fd/"
	names, err := w.names(dir, maxFDs)
	if err != nil {
		return 0 // gone, or not ours to read
	}
	var sum int64
	var lbuf [64]byte
	for _, n := range names {
		k, err := unix.Readlink(dir+n, lbuf[:])
		if err != nil {
			continue
		}
		l := lbuf[:k]
		if !bytes.HasPrefix(l, []byte("/memfd:")) && !(shm && bytes.HasPrefix(l, []byte("/dev/shm/"))) {
			continue
		}
		var st unix.Stat_t
		if unix.Stat(dir+n, &st) != nil || seen[[2]uint64{st.Dev, st.Ino}] {
			continue
		}
		seen[[2]uint64{st.Dev, st.Ino}] = true
		sum += st.Blocks * 512
	}
	return sum
}

// walk fills w.procs with the pids of the tree.
func (w *walker) walk() {
	w.procs = append(w.procs[:0], w.root)
	seen := map[int]bool{w.root: true}
	if w.scan {
		w.walkByScan(seen)
		return
	}
	for i := 0; i < len(w.procs) && len(w.procs) < maxTree; i++ {
		p := w.procs[i]
		tasks, err := w.names("/proc/"+strconv.Itoa(p)+"/task", maxTree)
		if err != nil {
			continue // exited
		}
		for _, t := range tasks {
			b, err := w.read("/proc/" + strconv.Itoa(p) + "/task/" + t + "/children")
			if errors.Is(err, fs.ErrNotExist) && p == w.root && i == 0 {
				if _, serr := os.Stat("/proc/" + strconv.Itoa(p) + "/task/" + t); serr == nil {
					w.scan = true
					w.walkByScan(seen)
					return
				}
			}
			for _, f := range bytes.Fields(b) {
				c, err := strconv.Atoi(string(f))
				if err == nil && !seen[c] {
					seen[c] = true
					w.procs = append(w.procs, c)
				}
			}
		}
	}
}

// walkByScan builds the tree from the parent pid of every process.
func (w *walker) walkByScan(seen map[int]bool) {
	ents, err := w.names("/proc", maxTree*4)
	if err != nil {
		return
	}
	kids := map[int][]int{}
	for _, e := range ents {
		p, err := strconv.Atoi(e)
		if err != nil {
			continue
		}
		b, err := w.read("/proc/" + e + "/stat")
		if err != nil {
			continue
		}
		f := statFields(b)
		if len(f) < 2 {
			continue
		}
		if pp, err := strconv.Atoi(f[1]); err == nil {
			kids[pp] = append(kids[pp], p)
		}
	}
	for i := 0; i < len(w.procs) && len(w.procs) < maxTree; i++ {
		for _, c := range kids[w.procs[i]] {
			if !seen[c] {
				seen[c] = true
				w.procs = append(w.procs, c)
			}
		}
	}
}

// status returns RssAnon+RssShmem in bytes and Threads of p (0, 0 if gone).
func (w *walker) status(p int) (mem, tasks int64) {
	b, err := w.read("/proc/" + strconv.Itoa(p) + "/status")
	if err != nil {
		return 0, 0
	}
	for len(b) > 0 {
		var line []byte
		line, b, _ = bytes.Cut(b, []byte{'\n'})
		k, v, ok := bytes.Cut(line, []byte{':'})
		if !ok {
			continue
		}
		switch string(k) {
		case "RssAnon":
			mem += kB(v)
		case "RssShmem":
			if !w.anonOnly {
				mem += kB(v)
			}
		case "Threads":
			n, _ := strconv.ParseInt(string(bytes.TrimSpace(v)), 10, 64)
			tasks = n
		}
	}
	if tasks == 0 {
		tasks = 1
	}
	return mem, tasks
}

// pss returns Pss_Anon+Pss_Shmem of p in bytes, false if unreadable or the
// kernel lacks the fields (before 5.9).
func (w *walker) pss(p int) (int64, bool) {
	b, err := w.read("/proc/" + strconv.Itoa(p) + "/smaps_rollup")
	if err != nil {
		return 0, errors.Is(err, fs.ErrNotExist) // gone: holds nothing
	}
	if len(bytes.TrimSpace(b)) == 0 {
		return 0, true // a zombie's smaps_rollup is empty
	}
	var sum int64
	found := false
	for len(b) > 0 {
		var line []byte
		line, b, _ = bytes.Cut(b, []byte{'\n'})
		k, v, ok := bytes.Cut(line, []byte{':'})
		if ok && (string(k) == "Pss_Anon" || string(k) == "Pss_Shmem" && !w.anonOnly) {
			sum += kB(v)
			found = true
		}
	}
	return sum, found
}

// cpu returns utime+stime+cutime+cstime of p.
func (w *walker) cpu(p int) time.Duration {
	b, err := w.read("/proc/" + strconv.Itoa(p) + "/stat")
	if err != nil {
		return 0
	}
	f := statFields(b)
	// statFields starts at field 3 (state); utime is field 14.
	if len(f) < 15 {
		return 0
	}
	var ticks int64
	for _, s := range f[11:15] {
		n, _ := strconv.ParseInt(s, 10, 64)
		ticks += n
	}
	return time.Duration(ticks) * time.Second / userHZ
}

// read reads path into w.buf. It makes only the system calls it needs
// (open, read, close): os.Open would also try to register each /proc file
// with the poller, which it cannot be, and allocate a File, on every file
// of every sample. A read error after open ends the contents, as EOF
// does.
func (w *walker) read(path string) ([]byte, error) {
	if w.buf == nil {
		w.buf = make([]byte, 16<<10)
	}
	b, err := readFile(path, w.buf)
	w.buf = b[:cap(b)]
	return b, err
}

func readFile(path string, buf []byte) ([]byte, error) {
	fd, err := open(path, 0)
	if err != nil {
		return nil, err
	}
	defer unix.Close(fd)
	buf = buf[:cap(buf)]
	n := 0
	for {
		if n == len(buf) {
			buf = append(buf, make([]byte, max(len(buf), 4<<10))...)
		}
		m, err := unix.Read(fd, buf[n:])
		if err == unix.EINTR {
			continue
		}
		if err != nil || m <= 0 {
			return buf[:n], nil
		}
		n += m
	}
}

// open opens path read-only (with flags), retrying on EINTR; the error
// is an *fs.PathError, so errors.Is(err, fs.ErrNotExist) works.
func open(path string, flags int) (int, error) {
	for {
		fd, err := unix.Open(path, unix.O_RDONLY|unix.O_CLOEXEC|flags, 0)
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return -1, &fs.PathError{Op: "open", Path: path, Err: err}
		}
		return fd, nil
	}
}

// names lists the entries of the directory dir, at most limit of them,
// without . and .., in the order the kernel gives them, with only the
// system calls it needs (see read).
func (w *walker) names(dir string, limit int) ([]string, error) {
	fd, err := open(dir, unix.O_DIRECTORY)
	if err != nil {
		return nil, err
	}
	defer unix.Close(fd)
	if w.dents == nil {
		w.dents = make([]byte, 8<<10)
	}
	var names []string
	for len(names) < limit {
		n, err := unix.Getdents(fd, w.dents)
		if err == unix.EINTR {
			continue
		}
		if err != nil || n <= 0 {
			break
		}
		_, _, names = unix.ParseDirent(w.dents[:n], limit-len(names), names)
	}
	return names, nil
}

// statFields returns the fields of /proc/PID/stat after the command name
// (which may hold spaces and parentheses): state first.
func statFields(b []byte) []string {
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return nil
	}
	return strings.Fields(string(b[i+1:]))
}

// startTime returns field 22 of /proc/PID/stat, the process's start time
// since boot, which tells a process from a later one with the same pid.
func startTime(pid int) (string, error) {
	return startTimeOf(readFile("/proc/"+strconv.Itoa(pid)+"/stat", make([]byte, 1<<10)))
}

// startTime is startTime(w.root), read into w's buffer.
func (w *walker) startTime() (string, error) {
	return startTimeOf(w.read("/proc/" + strconv.Itoa(w.root) + "/stat"))
}

func startTimeOf(b []byte, err error) (string, error) {
	if err != nil {
		return "", err
	}
	f := statFields(b)
	if len(f) < 20 {
		return "", errors.New("short /proc/PID/stat")
	}
	return f[19], nil
}

// kB parses " 1234 kB" into bytes.
func kB(v []byte) int64 {
	v = bytes.TrimSpace(bytes.TrimSuffix(bytes.TrimSpace(v), []byte("kB")))
	n, _ := strconv.ParseInt(string(v), 10, 64)
	return n << 10
}
