package limits

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"
)

// FindDelegated returns the cgroup v2 directory under which sandbox-run may
// create one cgroup per sandbox, or an error wrapping ErrNoCgroup that says
// why each candidate was refused and how to provide one.
//
// With base set (--cgroup-base), base is the only candidate. Otherwise the
// candidates are, in order:
//
//  1. the caller's own cgroup (from /proc/self/cgroup, on the cgroup2 mount
//     found in /proc/self/mountinfo) when it is the root of the hierarchy
//     as the caller sees it: a host's root cgroup, or a container's cgroup
//     namespace root;
//  2. the parent of the caller's cgroup, when it is delegated to the
//     caller: writable by it when the caller is not root, and carrying
//     systemd's delegation mark (the trusted.delegate or user.delegate
//     extended attribute) when it is root, for whom every cgroup is
//     writable but most belong to the service manager.
//
// A candidate must be on a cgroup2 file system and writable (the directory
// and its cgroup.procs). FindDelegated then enables the memory and pids
// controllers for its children (cgroup.subtree_control) where the
// candidate offers them and they are not enabled yet; that failing is not
// an error (Enabled reports what is on, and Create refuses limits whose
// controller is off).
//
// The no-internal-process rule: a cgroup other than the root cannot both
// hold processes and enable controllers for its children. FindDelegated
// never moves a process, the caller included: moving the caller would
// change the accounting of everything else it runs. A service that holds
// a delegated cgroup (systemd Delegate=yes) therefore moves itself into a
// leaf of it first (e.g. <unit>/supervisor), after which candidate 2 finds
// the unit's cgroup; or the operator prepares an empty directory and
// passes it as base:
//
//	mkdir /sys/fs/cgroup/<unit>/sandboxes
//	echo "+memory +pids" > /sys/fs/cgroup/<unit>/sandboxes/cgroup.subtree_control
//	chown -R <user> /sys/fs/cgroup/<unit>/sandboxes   # when not root
//
// In the root cgroup of a container's cgroup namespace (candidate 1)
// processes live, so enabling controllers fails there with EBUSY: the
// cgroup is still usable for Kill and CPU accounting, not for memory.max
// or pids.max.
func FindDelegated(base string) (string, error) {
	if base != "" {
		if err := usable(base); err != nil {
			return "", fmt.Errorf("limits: cgroup base %s: %w", base, err)
		}
		enableControllers(base)
		return base, nil
	}
	own, isRoot, err := ownCgroup()
	if err != nil {
		return "", fmt.Errorf("limits: find cgroup: %v: %w", err, ErrNoCgroup)
	}
	var why []string
	if isRoot {
		err := usable(own)
		if err == nil {
			enableControllers(own)
			return own, nil
		}
		why = append(why, own+": "+err.Error())
	} else {
		why = append(why, own+": holds this process, so it cannot enable controllers for children (no-internal-process rule)")
		parent := filepath.Dir(own)
		err := usable(parent)
		if err == nil {
			err = delegated(parent)
		}
		if err == nil {
			enableControllers(parent)
			return parent, nil
		}
		why = append(why, parent+": "+err.Error())
	}
	return "", fmt.Errorf("limits: find cgroup: %s (pass --cgroup-base with an empty delegated cgroup v2 directory): %w",
		strings.Join(why, "; "), ErrNoCgroup)
}

// usable checks that dir is a writable cgroup2 directory.
func usable(dir string) error {
	var st unix.Statfs_t
	if err := unix.Statfs(dir, &st); err != nil {
		return err
	}
	if st.Type != unix.CGROUP2_SUPER_MAGIC {
		return fmt.Errorf("not on a cgroup2 file system (cgroup v1 or hybrid hierarchy?): %w", ErrNoCgroup)
	}
	for _, p := range []string{dir, filepath.Join(dir, "cgroup.procs"), filepath.Join(dir, "cgroup.subtree_control")} {
		if err := unix.Access(p, unix.W_OK); err != nil {
			return fmt.Errorf("%s not writable: %w", p, err)
		}
	}
	return nil
}

// delegated checks, for a root caller, that systemd delegated dir: root can
// write every cgroup, but creating one in a cgroup the service manager owns
// breaks its bookkeeping.
func delegated(dir string) error {
	if os.Geteuid() != 0 {
		return nil // writability, checked by usable, is delegation
	}
	buf := make([]byte, 8)
	for _, attr := range []string{"trusted.delegate", "user.delegate"} {
		if n, err := unix.Getxattr(dir, attr, buf); err == nil && strings.TrimSpace(string(buf[:n])) == "1" {
			return nil
		}
	}
	return fmt.Errorf("not marked delegated (no trusted.delegate xattr; start the service with Delegate=yes): %w", ErrNoCgroup)
}

// enableControllers turns on memory and pids for dir's children where dir
// offers them; failures are left for Enabled and Create to report. What
// dir offers is read only when one of them is off.
func enableControllers(dir string) {
	on := words(filepath.Join(dir, "cgroup.subtree_control"))
	if on["memory"] && on["pids"] {
		return
	}
	avail := words(filepath.Join(dir, "cgroup.controllers"))
	for _, c := range []string{"memory", "pids"} {
		if avail[c] && !on[c] {
			writeFile(filepath.Join(dir, "cgroup.subtree_control"), "+"+c)
		}
	}
}

// Enabled reports whether the memory and pids controllers are enabled for
// the children of base (listed in its cgroup.subtree_control), that is,
// whether Create can hold Limits.Memory and Limits.Pids there.
func Enabled(base string) (memory, pids bool, err error) {
	b, err := os.ReadFile(filepath.Join(base, "cgroup.subtree_control"))
	if err != nil {
		return false, false, fmt.Errorf("limits: cgroup controllers of %s: %w", base, err)
	}
	for _, w := range strings.Fields(string(b)) {
		memory = memory || w == "memory"
		pids = pids || w == "pids"
	}
	return memory, pids, nil
}

// ownCgroup returns the directory of the caller's cgroup v2 and whether it
// is the root of the hierarchy as mounted.
func ownCgroup() (dir string, isRoot bool, err error) {
	b, err := os.ReadFile("/proc/self/cgroup")
	if err != nil {
		return "", false, err
	}
	rel := ""
	found := false
	for _, line := range strings.Split(string(b), "\n") {
		if p, ok := strings.CutPrefix(line, "0::"); ok {
			rel, found = p, true
		}
	}
	if !found {
		return "", false, errors.New("no cgroup v2 entry in /proc/self/cgroup (cgroup v1 only)")
	}
	mi, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		return "", false, err
	}
	for _, line := range strings.Split(string(mi), "\n") {
		pre, post, ok := strings.Cut(line, " - ")
		if !ok || !strings.HasPrefix(post, "cgroup2 ") {
			continue
		}
		f := strings.Fields(pre)
		if len(f) < 5 {
			continue
		}
		root, mnt := unescapeMount(f[3]), unescapeMount(f[4])
		sub, ok := strings.CutPrefix(rel, root)
		if !ok || (sub != "" && root != "/" && !strings.HasPrefix(sub, "/")) {
			continue
		}
		return filepath.Join(mnt, sub), rel == root, nil
	}
	return "", false, errors.New("no cgroup2 file system mounted")
}

// unescapeMount undoes mountinfo's octal escapes (\040 for a space).
func unescapeMount(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+4 <= len(s) {
			if v, err := strconv.ParseUint(s[i+1:i+4], 8, 8); err == nil {
				b.WriteByte(byte(v))
				i += 3
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

// Cgroup is one sandbox's cgroup, made by Create. Its methods are safe to
// call from one goroutine at a time, except FD, Path and Watch's channel.
type Cgroup struct {
	dir    string
	fd     int
	limits Limits
	closed bool
}

// DrainTimeout bounds how long Close waits for the killed processes to
// leave the cgroup.
const DrainTimeout = 5 * time.Second

// Create makes the cgroup base/name and writes l into it: memory.max,
// memory.swap.max 0 and memory.oom.group 1 (the OOM killer ends the whole
// sandbox, not one process of it) when l.Memory is set; pids.max when
// l.Pids is set. l.CPUTime is not written (cgroup v2 has no CPU-time
// budget); Watch compares it with cpu.stat. Other fields are ignored.
//
// It returns an error wrapping ErrController, and creates nothing, when
// l.Memory or l.Pids is set but base does not enable the memory or pids
// controller for its children; an error wrapping fs.ErrExist when
// base/name exists (a cgroup is never shared). On any failure nothing is
// left behind. When memory.swap.max is missing (no swap accounting) Create
// fails unless the host has no swap.
//
// Start the sandbox in it with syscall.SysProcAttr{UseCgroupFD: true,
// CgroupFD: c.FD()}. Close it when the sandbox has ended.
func Create(base, name string, l Limits) (*Cgroup, error) {
	if err := l.Validate(); err != nil {
		return nil, err
	}
	if name == "" || name == "." || name == ".." || strings.ContainsAny(name, "/\x00\n") || len(name) > 255 ||
		strings.HasPrefix(name, "cgroup.") {
		return nil, fmt.Errorf("limits: create cgroup %q: not a plain directory name: %w", name, ErrInvalid)
	}
	if err := checkControllers(base, l); err != nil {
		return nil, err
	}
	dir := filepath.Join(base, name)
	if err := os.Mkdir(dir, 0o755); err != nil {
		return nil, fmt.Errorf("limits: create cgroup: %w", err)
	}
	c := &Cgroup{dir: dir, fd: -1, limits: l}
	err := c.writeLimits(l)
	if err == nil {
		var fd int
		if fd, err = unix.Open(dir, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0); err == nil {
			c.fd = fd
		}
	}
	if err != nil {
		c.Close()
		return nil, fmt.Errorf("limits: create cgroup %s: %w", dir, err)
	}
	return c, nil
}

// checkControllers refuses l when base does not enable, for its children,
// the controller a limit of l needs.
func checkControllers(base string, l Limits) error {
	if l.Memory <= 0 && l.Pids <= 0 {
		return nil
	}
	mem, pids, err := Enabled(base)
	if err != nil {
		return err
	}
	if l.Memory > 0 && !mem {
		return fmt.Errorf("limits: create cgroup in %s: memory: %w (echo +memory > %s/cgroup.subtree_control)",
			base, ErrController, base)
	}
	if l.Pids > 0 && !pids {
		return fmt.Errorf("limits: create cgroup in %s: pids: %w (echo +pids > %s/cgroup.subtree_control)",
			base, ErrController, base)
	}
	return nil
}

// writeLimits writes l into c's files: the memory ceiling with no swap
// and the whole group killed together, and the task ceiling.
func (c *Cgroup) writeLimits(l Limits) error {
	if l.Memory > 0 {
		if err := c.write("memory.max", strconv.FormatInt(l.Memory, 10)); err != nil {
			return err
		}
		if err := c.write("memory.swap.max", "0"); err != nil {
			if !errors.Is(err, fs.ErrNotExist) || swapTotal() != 0 {
				return fmt.Errorf("cannot keep the sandbox out of swap: %w", err)
			}
		}
		if err := c.write("memory.oom.group", "1"); err != nil {
			return err
		}
	}
	if l.Pids > 0 {
		if err := c.write("pids.max", strconv.FormatInt(l.Pids, 10)); err != nil {
			return err
		}
	}
	return nil
}

// swapTotal returns SwapTotal from /proc/meminfo in kB, -1 if unknown.
func swapTotal() int64 { return meminfo("SwapTotal:") }

// DefaultMemory is DefaultMemoryOf the host's MemTotal (/proc/meminfo). It
// returns an error when MemTotal cannot be read: a run then has no default
// to hold, and the caller refuses rather than run without one.
func DefaultMemory() (int64, error) {
	kb := meminfo("MemTotal:")
	if kb <= 0 {
		return 0, errors.New("limits: default memory ceiling: no MemTotal in /proc/meminfo")
	}
	return DefaultMemoryOf(kb << 10), nil
}

// meminfo returns the line of /proc/meminfo starting with key, in kB, -1
// if unknown.
func meminfo(key string) int64 {
	f, err := os.Open("/proc/meminfo")
	if err != nil {
		return -1
	}
	defer f.Close()
	s := bufio.NewScanner(f)
	for s.Scan() {
		if v, ok := strings.CutPrefix(s.Text(), key); ok {
			n, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
			if err != nil {
				return -1
			}
			return n
		}
	}
	return -1
}

// Path returns the cgroup's directory.
func (c *Cgroup) Path() string { return c.dir }

// FD returns a descriptor of the cgroup's directory (O_RDONLY, close-on-exec)
// for clone3's CLONE_INTO_CGROUP (syscall.SysProcAttr.CgroupFD). It stays
// valid until Close.
func (c *Cgroup) FD() int { return c.fd }

// Limits returns the limits Create wrote (and Watch compares with).
func (c *Cgroup) Limits() Limits { return c.limits }

func (c *Cgroup) write(file, v string) error {
	return writeFile(filepath.Join(c.dir, file), v)
}

// Kill sends SIGKILL to every process in the cgroup at once (cgroup.kill,
// Linux 5.14). On older kernels it kills the processes listed in
// cgroup.procs, repeating while new ones appear (bounded by DrainTimeout),
// which a fork bomb can outrun for that long.
func (c *Cgroup) Kill() error {
	err := c.write("cgroup.kill", "1")
	if err == nil || !errors.Is(err, fs.ErrNotExist) {
		if err != nil {
			return fmt.Errorf("limits: kill cgroup %s: %w", c.dir, err)
		}
		return nil
	}
	deadline := time.Now().Add(DrainTimeout)
	for time.Now().Before(deadline) {
		pids, err := c.Procs()
		if err != nil {
			return err
		}
		if len(pids) == 0 {
			return nil
		}
		for _, p := range pids {
			unix.Kill(p, unix.SIGKILL)
		}
		time.Sleep(time.Millisecond)
	}
	return fmt.Errorf("limits: kill cgroup %s: processes still appearing after %v", c.dir, DrainTimeout)
}

// Procs returns the pids in cgroup.procs.
func (c *Cgroup) Procs() ([]int, error) {
	b, err := os.ReadFile(filepath.Join(c.dir, "cgroup.procs"))
	if err != nil {
		return nil, fmt.Errorf("limits: cgroup %s: %w", c.dir, err)
	}
	var out []int
	for _, w := range strings.Fields(string(b)) {
		if p, err := strconv.Atoi(w); err == nil {
			out = append(out, p)
		}
	}
	return out, nil
}

// Populated reports whether any process is in the cgroup (cgroup.events).
func (c *Cgroup) Populated() (bool, error) {
	kv, err := readKV(filepath.Join(c.dir, "cgroup.events"))
	if err != nil {
		return false, fmt.Errorf("limits: cgroup %s: %w", c.dir, err)
	}
	return kv["populated"] != 0, nil
}

// Events reads memory.events and pids.events. A file that does not exist
// (controller not enabled) counts as zeros. Read it before Close.
func (c *Cgroup) Events() (Events, error) {
	var e Events
	mem, err := readKV(filepath.Join(c.dir, "memory.events"))
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return e, fmt.Errorf("limits: cgroup %s: %w", c.dir, err)
	}
	pids, err := readKV(filepath.Join(c.dir, "pids.events"))
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return e, fmt.Errorf("limits: cgroup %s: %w", c.dir, err)
	}
	e.OOMKills, e.OOMGroupKills, e.PidsMax = mem["oom_kill"], mem["oom_group_kill"], pids["max"]
	return e, nil
}

// CPUTime returns the CPU time used by every process that has been in the
// cgroup, exited ones included (cpu.stat usage_usec; present in every
// non-root cgroup v2 without the cpu controller).
func (c *Cgroup) CPUTime() (time.Duration, error) {
	kv, err := readKV(filepath.Join(c.dir, "cpu.stat"))
	if err != nil {
		return 0, fmt.Errorf("limits: cgroup %s: %w", c.dir, err)
	}
	u, ok := kv["usage_usec"]
	if !ok {
		return 0, fmt.Errorf("limits: cgroup %s: cpu.stat has no usage_usec", c.dir)
	}
	return time.Duration(u) * time.Microsecond, nil
}

// MemoryPeak returns memory.peak (Linux 5.19), or memory.current where it
// is missing, in bytes.
func (c *Cgroup) MemoryPeak() (int64, error) {
	for _, f := range []string{"memory.peak", "memory.current"} {
		b, err := os.ReadFile(filepath.Join(c.dir, f))
		if err == nil {
			return strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64)
		}
		if !errors.Is(err, fs.ErrNotExist) {
			return 0, err
		}
	}
	return 0, fmt.Errorf("limits: cgroup %s: no memory accounting: %w", c.dir, fs.ErrNotExist)
}

// Watch polls the cgroup every interval (SlowInterval if 0) and sends one
// Exceeded when the OOM killer ran (MemoryLimit), a fork was refused at
// pids.max (PidsLimit) or cpu.stat passed Limits().CPUTime (CpuLimit).
// The kernel has already held the memory and pids limits; Watch is how the
// launcher learns it, to end the whole sandbox and report it. The channel
// is closed after that send, when ctx is done, or when the cgroup is empty
// and nothing was exceeded.
func (c *Cgroup) Watch(ctx context.Context, interval time.Duration) <-chan Exceeded {
	if interval <= 0 {
		interval = SlowInterval
	}
	out := make(chan Exceeded, 1)
	go func() {
		defer close(out)
		t := time.NewTicker(interval)
		defer t.Stop()
		for {
			// populated first: an event that ended the last process
			// happened before the read that saw the cgroup empty.
			populated, perr := c.Populated()
			if x, ok := c.Exceeded(); ok {
				out <- x
				return
			}
			if perr != nil || !populated {
				return
			}
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			}
		}
	}()
	return out
}

// Exceeded reads the cgroup's events and returns what Watch would send:
// MemoryLimit when the OOM killer ran (Usage is memory.peak), PidsLimit
// when a fork was refused at pids.max, CpuLimit when cpu.stat passed
// Limits().CPUTime; ok is false when none was. A launcher whose sandbox
// ended before Watch reported (the OOM killer ends the whole group, PID 1
// included, at once) reads it for the usage and the limit.
func (c *Cgroup) Exceeded() (Exceeded, bool) {
	e, err := c.Events()
	if err == nil {
		switch e.Kind() {
		case MemoryLimit:
			peak, _ := c.MemoryPeak()
			return Exceeded{Kind: MemoryLimit, Usage: peak, Limit: c.limits.Memory}, true
		case PidsLimit:
			// pids.max was held: the usage reported is the refused task.
			return Exceeded{Kind: PidsLimit, Usage: c.limits.Pids + 1, Limit: c.limits.Pids}, true
		}
	}
	if c.limits.CPUTime > 0 {
		if u, err := c.CPUTime(); err == nil && u > c.limits.CPUTime {
			return Exceeded{Kind: CpuLimit, Usage: int64(u), Limit: int64(c.limits.CPUTime)}, true
		}
	}
	return Exceeded{}, false
}

// Close kills every process in the cgroup, waits (at most DrainTimeout)
// until it is empty, removes it and closes FD. After Close returns nil the
// cgroup no longer exists. It returns an error, and leaves the directory,
// if processes remain; calling it again retries.
func (c *Cgroup) Close() error {
	if c.closed {
		return nil
	}
	if err := c.Kill(); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	deadline := time.Now().Add(DrainTimeout)
	for {
		populated, err := c.Populated()
		if errors.Is(err, fs.ErrNotExist) {
			break // already gone
		}
		if err == nil && !populated {
			if err := unix.Rmdir(c.dir); err == nil || errors.Is(err, fs.ErrNotExist) {
				break
			} else if err != unix.EBUSY {
				return fmt.Errorf("limits: remove cgroup %s: %w", c.dir, err)
			}
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("limits: remove cgroup %s: still populated after %v: %w", c.dir, DrainTimeout, unix.EBUSY)
		}
		time.Sleep(time.Millisecond)
	}
	if c.fd >= 0 {
		unix.Close(c.fd)
		c.fd = -1
	}
	c.closed = true
	return nil
}

// writeFile writes v to an existing cgroup file in one write(2), as the
// cgroup interface expects.
func writeFile(path, v string) error {
	f, err := os.OpenFile(path, os.O_WRONLY, 0)
	if err != nil {
		return err
	}
	_, err = f.Write([]byte(v))
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}

// readKV parses a flat keyed file ("key value" per line).
func readKV(path string) (map[string]int64, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	kv := map[string]int64{}
	for _, line := range strings.Split(string(b), "\n") {
		k, v, ok := strings.Cut(line, " ")
		if !ok {
			continue
		}
		if n, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64); err == nil {
			kv[k] = n
		}
	}
	return kv, nil
}

func readInt(path string) (int64, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0, err
	}
	return strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64)
}

func words(path string) map[string]bool {
	m := map[string]bool{}
	b, err := os.ReadFile(path)
	if err != nil {
		return m
	}
	for _, w := range strings.Fields(string(b)) {
		m[w] = true
	}
	return m
}
