package bwrap

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"

	"github.com/sandbox-run/sandbox-run/internal/exitcode"
	"github.com/sandbox-run/sandbox-run/internal/initproc"
	"github.com/sandbox-run/sandbox-run/internal/limits"
	"github.com/sandbox-run/sandbox-run/internal/mechanism"
	"github.com/sandbox-run/sandbox-run/internal/plan"
	"github.com/sandbox-run/sandbox-run/policy"
)

// The fast path. When nothing is forwarded and no rlimit beyond core
// dumps and the process ceiling needs the exec shim, sandbox-run's own
// init is not started: bwrap's PID 1 reaps, and this POSIX sh script, run
// by the sandbox's /bin/sh with builtins only, does init's remaining jobs
// in well under a millisecond rather than a second Go start:
//
//   - it sets RLIMIT_NPROC, the process ceiling, with ulimit (-u in bash,
//     zsh and busybox, -p in dash and mksh: whichever the shell takes),
//     and refuses to go on (status 125, an error line on the status
//     descriptor) when the shell can do neither;
//   - it raises its oom_score_adj to 1000 (limits.OOMScoreAdj), which the
//     command inherits, so that the host's OOM killer ends it first;
//     sandbox-run reads it back at the gate and keeps the gate shut
//     unless it is 1000;
//   - it writes "ready" on the status descriptor and waits at the gate,
//     fd 7, for sandbox-run's "go". Meanwhile sandbox-run reads the
//     kernel's view of the script's process from the host
//     (readTrampoline): NoNewPrivs, Seccomp, the capability sets and the
//     ids from /proc/PID/status, the first line of its uid_map, and
//     RLIMIT_NPROC from /proc/PID/limits, which must be exactly the
//     ceiling asked for, soft and hard. Anything else, or no "go" at
//     all, and the script exits 125 without running the command. (The
//     script read those files itself before; dash reads one byte per
//     read(2), some 1,500 of them, 0.7 ms on every run.)
//   - it writes "started" and closes the status and gate descriptors,
//     gives the command the real standard error (bwrap's own goes to a
//     pipe sandbox-run reads, so that a set-up failure becomes one line),
//     turns core dumps off and becomes the command.
//
// Signals go to the command's process group (it leads its own session);
// sandbox-run finds it as the child of bwrap's PID 1.
const trampolineGate = `echo 1000 >/proc/self/oom_score_adj || { echo 'error: cannot raise oom_score_adj' >&4; exit 125; }
echo ready >&4
read -r g <&7 && [ "$g" = go ] || exit 125
`

const trampolineExec = `echo started >&4
exec 4>&- 2>&5 5>&- 7>&-
ulimit -c 0
exec "$@"`

// trampolineArgs is what bwrap runs on the fast path; nproc > 0 sets the
// process ceiling.
func trampolineArgs(resolved string, cmd []string, nproc uint64) []string {
	script := trampolineGate + trampolineExec
	if nproc > 0 {
		script = initproc.ShellNProc(nproc, 4) + script
	}
	return append([]string{"/bin/sh", "-c", script, cmd[0], resolved}, cmd[1:]...)
}

// decodeTrampoline reads the status lines the trampoline wrote: "ready"
// at the gate, "started", or one "error: ..." line. The read-back is
// sandbox-run's own (readTrampoline), not the script's.
func decodeTrampoline(b []byte) *initproc.Status {
	s := &initproc.Status{}
	for _, line := range strings.Split(string(b), "\n") {
		k, v, _ := strings.Cut(strings.TrimSpace(line), " ")
		switch k {
		case "started":
			s.Started = true
		case "error:":
			s.Error, s.Exit = strings.TrimSpace(v), exitcode.Setup
		}
	}
	return s
}

// readTrampoline reads the kernel's view of the trampoline, pid as the
// host sees it, while it waits at the gate: its status (PID is its pid in
// the sandbox's PID namespace, the last of NSpid; the ids are the host's
// view, which bwrap maps to the same ids inside), the first line of its
// uid_map, and, when nproc > 0, that RLIMIT_NPROC is nproc, soft and hard.
// It returns an error when that limit is not held or a file cannot be
// read: the gate then stays shut.
func readTrampoline(pid int, nproc uint64) (*initproc.Readback, error) {
	dir := "/proc/" + strconv.Itoa(pid) + "/"
	b, err := os.ReadFile(dir + "status")
	if err != nil {
		return nil, err
	}
	rb := &initproc.Readback{PID: -1, UID: -1, GID: -1, NoNewPrivs: -1, Seccomp: -1}
	rb.ParseStatus(b)
	if _, v, ok := strings.Cut(string(b), "\nNSpid:"); ok {
		line, _, _ := strings.Cut(v, "\n")
		if f := strings.Fields(line); len(f) > 0 {
			rb.PID, _ = strconv.Atoi(f[len(f)-1])
		}
	}
	if b, err := os.ReadFile(dir + "uid_map"); err == nil {
		first, _, _ := strings.Cut(string(b), "\n")
		rb.UIDMap = strings.Join(strings.Fields(first), " ")
	}
	if nproc == 0 {
		return rb, nil
	}
	b, err = os.ReadFile(dir + "limits")
	if err != nil {
		return nil, err
	}
	want := strconv.FormatUint(nproc, 10)
	soft, hard := maxProcesses(b)
	if soft != want || hard != want {
		return nil, fmt.Errorf("%w: it reads back as '%s %s', not %s", errNProcNotHeld, soft, hard, want)
	}
	return rb, nil
}

// errNProcNotHeld: the kernel does not hold the process ceiling the
// trampoline set.
var errNProcNotHeld = errors.New("RLIMIT_NPROC is not held as asked")

// maxProcesses is the soft and hard value of the "Max processes" line of
// a /proc/PID/limits file; "" when there is none.
func maxProcesses(limits []byte) (soft, hard string) {
	for _, line := range strings.Split(string(limits), "\n") {
		if rest, ok := strings.CutPrefix(line, "Max processes"); ok {
			if f := strings.Fields(rest); len(f) >= 2 {
				return f[0], f[1]
			}
		}
	}
	return "", ""
}

// bwInfo is what bwrap's --info-fd says of the sandbox it made.
type bwInfo struct {
	pid int               // the sandbox's PID 1, as the host sees it; 0 if unsaid
	ns  map[string]string // namespace name to link text, "net:[4026532184]"
}

// readInfo decodes bwrap's --info-fd JSON: the child's pid and, from bwrap
// 0.4 on, the inode of each namespace it made (not the user namespace).
func readInfo(r io.Reader) bwInfo {
	var v map[string]json.Number
	if json.NewDecoder(r).Decode(&v) != nil {
		return bwInfo{}
	}
	info := bwInfo{ns: map[string]string{}}
	if n, err := v["child-pid"].Int64(); err == nil {
		info.pid = int(n)
	}
	for _, ns := range []string{"mnt", "pid", "net", "ipc", "uts", "cgroup"} {
		if n, err := strconv.ParseUint(v[ns+"-namespace"].String(), 10, 64); err == nil && n > 0 {
			info.ns[ns] = fmt.Sprintf("%s:[%d]", ns, n)
		}
	}
	return info
}

// namespacesOf reads the namespaces of pid (the sandbox's PID 1, in them
// from its birth) from the host side, for the report's read-back on the
// fast path. Reading a namespace link takes ptrace access to pid, which
// sandbox-run lacks when it runs as root without CAP_SYS_PTRACE (in a
// container) and the sandbox as another uid; then a namespace falls back
// to the inode bwrap read itself (bwrap, as the sandbox's uid, may), and
// the user namespace, which bwrap does not report, is left to
// userNSFromMap. A namespace neither way shows is left out, and counts as
// the host's.
func namespacesOf(pid int, fromBwrap map[string]string) map[string]string {
	m := map[string]string{}
	for _, ns := range []string{"user", "mnt", "pid", "net", "ipc", "uts", "cgroup"} {
		if l, err := os.Readlink("/proc/" + strconv.Itoa(pid) + "/ns/" + ns); err == nil {
			m[ns] = l
		} else if l, ok := fromBwrap[ns]; ok {
			m[ns] = l
		}
	}
	return m
}

// userNSFromMap is the user namespace's read-back entry from the first
// line of the uid_map the command read of itself, "user:uid_map=" and
// that line, when it differs from sandbox-run's own: a process in
// sandbox-run's user namespace reads the same map. "" when it does not
// differ or cannot be read.
func userNSFromMap(inside string) string {
	b, err := os.ReadFile("/proc/self/uid_map")
	if err != nil {
		return ""
	}
	first, _, _ := strings.Cut(string(b), "\n")
	ours := strings.Join(strings.Fields(first), " ")
	theirs := strings.Join(strings.Fields(inside), " ")
	if theirs == "" || theirs == ours {
		return ""
	}
	return "user:uid_map=" + theirs
}

// commandPID finds the command on the fast path: the first child of
// bwrap's PID 1 (pid, as the host sees it). 0 when it cannot be found.
func commandPID(pid int) int {
	if t := limits.Tree(pid); len(t) > 1 {
		return t[1]
	}
	return 0
}

// resolveCommand finds cmd the way the command's PATH would inside the
// sandbox, looking only in directories the sandbox shows at the same path
// (the system, the writable and the --read paths). It returns an
// *mechanism.ExecError (127 or 126) when the command cannot run, before any
// sandbox is set up.
func resolveCommand(name, workdir string, env []string, visible []string, uid, gid int) (string, error) {
	isVisible := func(p string) bool {
		for _, v := range visible {
			if policy.Within(p, v) {
				return true
			}
		}
		return false
	}
	try := func(p string) (string, error) {
		if !isVisible(p) {
			return "", fs.ErrNotExist
		}
		fi, err := os.Stat(p)
		if err != nil {
			return "", err
		}
		if fi.IsDir() || !executableBy(p, fi, uid, gid) {
			return "", fs.ErrPermission
		}
		return p, nil
	}
	var found error = fs.ErrNotExist
	if strings.Contains(name, "/") {
		p := name
		if !filepath.IsAbs(p) {
			p = filepath.Join(workdir, p)
		}
		r, err := try(filepath.Clean(p))
		if err == nil {
			return r, nil
		}
		found = err
	} else {
		path := ""
		for _, kv := range env {
			if v, ok := strings.CutPrefix(kv, "PATH="); ok {
				path = v
			}
		}
		for _, dir := range filepath.SplitList(path) {
			if dir == "" || !filepath.IsAbs(dir) {
				continue
			}
			r, err := try(filepath.Join(dir, name))
			if err == nil {
				return r, nil
			}
			if errors.Is(err, fs.ErrPermission) {
				found = err
			}
		}
	}
	if errors.Is(found, fs.ErrPermission) {
		return "", &mechanism.ExecError{Code: exitcode.NotExecutable, Command: name, Reason: "not executable (for uid " + strconv.Itoa(uid) + ")"}
	}
	return "", &mechanism.ExecError{Code: exitcode.NotFound, Command: name, Reason: "command not found"}
}

func executableBy(p string, fi fs.FileInfo, uid, gid int) bool {
	if os.Geteuid() != 0 {
		// The sandbox runs as the caller: the kernel's own answer counts
		// supplementary groups and ACLs.
		return unix.Access(p, unix.X_OK) == nil
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return false
	}
	return plan.Permits(uint32(fi.Mode().Perm()), st.Uid, st.Gid, uid, gid, 1)
}
