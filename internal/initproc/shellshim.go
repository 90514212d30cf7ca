package initproc

import (
	"fmt"

	"github.com/sandbox-run/sandbox-run/internal/limits"
)

// SplitRlimits sorts rs by what can set them on the command: nproc is the
// RLIMIT_NPROC value a POSIX sh's ulimit sets, soft and hard alike (0:
// none), and shim reports whether any other rlimit needs the exec shim.
// Core dumps off needs neither: init turns them off for itself, and the
// command inherits that.
//
// The split exists for speed. The exec shim is this 14 MB binary started
// again, about 2 ms before the command runs; the sandbox's /bin/sh takes
// about 0.6 ms to set the one limit almost every run has, the process
// ceiling.
func SplitRlimits(rs []limits.Rlimit) (nproc uint64, shim bool) {
	for _, r := range rs {
		switch {
		case r.Resource == limits.Core && r.Soft == 0 && r.Hard == 0:
		case r.Resource == limits.NProc && r.Soft == r.Hard && r.Soft != limits.Infinity && r.Soft > 0:
			nproc = r.Soft
		default:
			shim = true
		}
	}
	return nproc, shim
}

// ShellNProc is the sh line that sets RLIMIT_NPROC to nproc, soft and hard:
// ulimit -u in bash, zsh and busybox, -p in dash and mksh, whichever the
// shell takes. A shell that can do neither writes one error line on
// descriptor errFD and exits 125, so the command never runs without its
// ceiling.
func ShellNProc(nproc uint64, errFD int) string {
	return fmt.Sprintf("ulimit -u %[1]d 2>/dev/null || ulimit -p %[1]d 2>/dev/null || "+
		"{ echo 'error: /bin/sh cannot set RLIMIT_NPROC (neither ulimit -u nor ulimit -p)' >&%[2]d; exit 125; }\n", nproc, errFD)
}

// shellExecArgs is the argv on which the sandbox's /bin/sh sets the process
// ceiling and becomes path, the command, with argv[1:]. The command sees
// path as its argv[0], as on bwrap's fast path; argv[0] names it in the
// shell's own error.
func shellExecArgs(nproc uint64, path string, argv []string) []string {
	script := ShellNProc(nproc, 2) + `exec "$@"`
	return append([]string{"/bin/sh", "-c", script, argv[0], path}, argv[1:]...)
}

// execPlan is what init executes to start the command under rs: the
// command itself when no rlimit needs setting, the sandbox's /bin/sh when
// the process ceiling is the only one and shOK says there is an executable
// /bin/sh (shellExecArgs), and the exec shim, this binary again, otherwise.
// Either way the command starts under every limit in rs. broker makes it
// the exec shim whatever rs holds: the shim puts the connect broker's
// filter on (its socket is descriptor 3).
func execPlan(rs []limits.Rlimit, path string, argv []string, shOK, broker bool) (exe string, args []string) {
	nproc, shim := SplitRlimits(rs)
	switch {
	case broker:
		return "/proc/self/exe", append([]string{"sandbox-run", ExecArg, BrokerMark}, ExecArgs(rs, path, argv)[1:]...)
	case shim || nproc > 0 && !shOK:
		return "/proc/self/exe", append([]string{"sandbox-run"}, ExecArgs(rs, path, argv)...)
	case nproc > 0:
		args = shellExecArgs(nproc, path, argv)
		return args[0], args
	}
	return path, argv
}
