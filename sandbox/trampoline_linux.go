package sandbox

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

	"github.com/sandbox-run/sandbox-run/internal/initproc"
	"github.com/sandbox-run/sandbox-run/internal/limits"
)

// The fast path. When nothing is forwarded and no rlimit beyond core
// dumps and the process ceiling needs the exec shim, sandbox-run's own
// init is not started: bwrap's PID 1 reaps, and this POSIX sh script, run
// by the sandbox's /bin/sh with builtins only, does init's remaining jobs
// in well under a millisecond rather than a second Go start:
//
//   - it sets RLIMIT_NPROC, the process ceiling, with ulimit (-u in bash,
//     zsh and busybox, -p in dash and mksh: whichever the shell takes),
//     reads it back from /proc/self/limits and refuses to go on (status
//     125, an error line on the status descriptor) unless the kernel holds
//     exactly that value, soft and hard;
//   - it reports the kernel's view of itself (NoNewPrivs, Seccomp, CapEff,
//     CapBnd, Uid from /proc/self/status, the first line of
//     /proc/self/uid_map) and "started" on the status descriptor, then
//     closes it, so sandbox-run knows setup is over;
//   - it gives the command the real standard error (bwrap's own goes to a
//     pipe sandbox-run reads, so that a setup failure becomes one line);
//   - it turns core dumps off and becomes the command.
//
// Signals go to the command's process group (it leads its own session);
// sandbox-run finds it as the child of bwrap's PID 1.
//
// The shell's read takes one byte per read(2), so both loops stop at the
// last line they need rather than read the files to the end.
const trampolineStatus = `read -r a b c </proc/self/uid_map && echo "UidMap: $a $b $c" >&4
n=0; while read -r k v; do case $k in NoNewPrivs:|Seccomp:|CapEff:|CapBnd:|Uid:) printf '%s %s\n' "$k" "$v"; n=$((n+1)); [ $n = 5 ] && break;; esac; done </proc/self/status >&4
`

const trampolineExec = `echo started >&4
exec 4>&- 2>&5 5>&- 7>&-
ulimit -c 0
exec "$@"`

// trampolineNProc sets and reads back RLIMIT_NPROC; %[1]d is the value.
const trampolineNProc = `ulimit -u %[1]d 2>/dev/null || ulimit -p %[1]d 2>/dev/null || { echo 'error: /bin/sh cannot set RLIMIT_NPROC (neither ulimit -u nor ulimit -p)' >&4; exit 125; }
m=; while read -r a b c d e; do [ "$a $b" = "Max processes" ] && { m="$c $d"; break; }; done </proc/self/limits
[ "$m" = "%[1]d %[1]d" ] || { echo "error: RLIMIT_NPROC reads back as '$m', not %[1]d" >&4; exit 125; }
`

// trampolineRlimits splits rs for the fast path: the RLIMIT_NPROC value
// the trampoline sets (0: none), and whether any rlimit other than that and
// core dumps needs the exec shim.
func trampolineRlimits(rs []limits.Rlimit) (nproc uint64, shim bool) {
	for _, r := range rs {
		switch {
		case r.Resource == limits.Core && r.Soft == 0 && r.Hard == 0:
		case r.Resource == limits.NProc && r.Soft == r.Hard && r.Soft != limits.Infinity:
			nproc = r.Soft
		default:
			shim = true
		}
	}
	return nproc, shim
}

// trampolineArgs is what bwrap runs on the fast path; nproc > 0 sets the
// process ceiling.
func trampolineArgs(resolved string, cmd []string, nproc uint64) []string {
	script := trampolineStatus
	if nproc > 0 {
		script = fmt.Sprintf(trampolineNProc, nproc) + script
	}
	script += trampolineExec
	return append([]string{"/bin/sh", "-c", script, cmd[0], resolved}, cmd[1:]...)
}

// decodeTrampoline reads the status lines the trampoline wrote.
func decodeTrampoline(b []byte) *initproc.Status {
	s := &initproc.Status{Readback: &initproc.Readback{PID: -1, NoNewPrivs: -1, Seccomp: -1, Namespaces: map[string]string{}}}
	for _, line := range strings.Split(string(b), "\n") {
		k, v, _ := strings.Cut(strings.TrimSpace(line), " ")
		v = strings.TrimSpace(v)
		switch k {
		case "started":
			s.Started = true
		case "error:":
			s.Error, s.Exit = v, 125
		case "NoNewPrivs:":
			s.Readback.NoNewPrivs, _ = strconv.Atoi(v)
		case "Seccomp:":
			s.Readback.Seccomp, _ = strconv.Atoi(v)
		case "CapEff:":
			s.Readback.CapEff = v
		case "CapBnd:":
			s.Readback.CapBnd = v
		case "UidMap:":
			s.Readback.UIDMap = v
		case "Uid:":
			if f := strings.Fields(v); len(f) > 0 {
				s.Readback.UID, _ = strconv.Atoi(f[0])
			}
		}
	}
	return s
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

// commandPID finds the command on the fast path: the child of bwrap's PID
// 1 (pid, as the host sees it). 0 when it cannot be found.
func commandPID(pid int) int {
	p := strconv.Itoa(pid)
	b, err := os.ReadFile("/proc/" + p + "/task/" + p + "/children")
	if err != nil {
		return 0
	}
	f := strings.Fields(string(b))
	if len(f) == 0 {
		return 0
	}
	n, _ := strconv.Atoi(f[0])
	return n
}

// resolveCommand finds cmd the way the command's PATH would inside the
// sandbox, looking only in directories the sandbox shows at the same path
// (the system, the writable and the --read paths). It returns an
// *ExecError (127 or 126) when the command cannot run, before any
// sandbox is set up.
func resolveCommand(name, workdir string, env []string, visible []string, uid, gid int) (string, error) {
	isVisible := func(p string) bool {
		for _, v := range visible {
			if within(p, v) {
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
		return "", &ExecError{Code: 126, Command: name, Reason: "not executable (for uid " + strconv.Itoa(uid) + ")"}
	}
	return "", &ExecError{Code: 127, Command: name, Reason: "command not found"}
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
	mode := uint32(fi.Mode().Perm())
	switch {
	case int(st.Uid) == uid:
		return mode&0o100 != 0
	case int(st.Gid) == gid:
		return mode&0o010 != 0
	}
	return mode&0o001 != 0
}
