package bwrap

import (
	"errors"
	"os"
	"strconv"
	"strings"

	bw "github.com/sandbox-run/sandbox-run/bwrap"
	"github.com/sandbox-run/sandbox-run/internal/fault"
	"github.com/sandbox-run/sandbox-run/internal/initproc"
	"github.com/sandbox-run/sandbox-run/report"
)

// What only the Linux mechanisms put in a report: bwrap's diagnosis,
// init's read-back and the inotify ceiling.

// bwrapErr is bwrap's own diagnosis as a SetupError (the same type,
// fault.Error, with bwrap's as its cause); other errors pass.
func bwrapErr(err error) error {
	var be *bw.SetupError
	if errors.As(err, &be) {
		return &fault.Error{What: be.What, Why: be.Why, Fix: be.Fix, Err: be}
	}
	return err
}

// inotifyLost names the inotify ceiling as not held in rep (enforced
// "none") and says why in a note: a default that could not be had is
// named as lost, never claimed.
func inotifyLost(rep *report.Report, why error) {
	for i, l := range rep.Limits {
		if l.Name == "inotify_instances" || l.Name == "inotify_watches" {
			rep.Limits[i].Enforced = "none"
		}
	}
	rep.Notes = append(rep.Notes, "the inotify ceiling is not held: "+why.Error())
}

// bwrapProtections lists what a tier-1 bwrap run configures.
func bwrapProtections(disableUserns, bindsByFD, cgroupNS bool, uid int, seccompDigest string) []report.Protection {
	p := []report.Protection{
		{Name: "namespace:user", Configured: true},
		{Name: "namespace:mount", Configured: true},
		{Name: "namespace:pid", Configured: true},
		{Name: "namespace:ipc", Configured: true},
		{Name: "namespace:uts", Configured: true},
		{Name: "namespace:net", Configured: true},
		{Name: "namespace:cgroup", Configured: cgroupNS, Detail: "if the kernel allows (--unshare-cgroup-try)"},
		{Name: "capabilities_dropped", Configured: true},
		{Name: "no_new_privs", Configured: true},
		{Name: "seccomp", Configured: true, Detail: seccompDigest},
		{Name: "userns_disabled", Configured: disableUserns, Detail: "bwrap --disable-userns; the seccomp filter refuses new namespaces besides"},
		{Name: "proc_masking", Configured: true},
		{Name: "unprivileged_host_uid", Configured: uid != 0},
		{Name: "protected_paths", Configured: true},
		{Name: "binds_by_fd", Configured: bindsByFD},
		{Name: "environment_cleared", Configured: true},
		{Name: "descriptors_closed", Configured: true},
	}
	return p
}

// verify fills Verified from what init read from inside.
func verify(ps []report.Protection, rb *initproc.Readback) {
	if rb == nil {
		return
	}
	t, f := true, false
	set := func(name string, ok bool) {
		for i := range ps {
			if ps[i].Name == name {
				if ok {
					ps[i].Verified = &t
				} else {
					ps[i].Verified = &f
				}
			}
		}
	}
	for _, ns := range []string{"user", "mnt", "pid", "net", "ipc", "uts", "cgroup"} {
		host, err := os.Readlink("/proc/self/ns/" + ns)
		inside, ok := rb.Namespaces[ns]
		name := "namespace:" + ns
		if ns == "mnt" {
			name = "namespace:mount"
		}
		if err == nil && ok {
			set(name, inside != host)
		}
	}
	set("capabilities_dropped", strings.Trim(rb.CapEff, "0") == "" && strings.Trim(rb.CapBnd, "0") == "")
	set("no_new_privs", rb.NoNewPrivs == 1)
	set("seccomp", rb.Seccomp == 2)
}

// verifyHostUID records the uid the host saw the sandbox's PID 1 run as
// (bwrap nests user namespaces, so uid_map read inside names the
// intermediate namespace, not the host). uid < 0: it could not be read.
func verifyHostUID(ps []report.Protection, uid int) {
	if uid < 0 {
		return
	}
	ok := uid != 0
	for i := range ps {
		if ps[i].Name == "unprivileged_host_uid" {
			ps[i].Verified = &ok
			ps[i].Detail = "host uid " + strconv.Itoa(uid) + ", read from /proc/PID/status of the sandbox's PID 1"
		}
	}
}
