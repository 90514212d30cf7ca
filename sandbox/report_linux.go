package sandbox

import (
	"errors"

	"github.com/sandbox-run/sandbox-run/bwrap"
	"github.com/sandbox-run/sandbox-run/internal/initproc"
)

// What only the Linux mechanisms put in a report: bwrap's diagnosis,
// init's read-back and the inotify ceiling.

// bwrapErr is bwrap's own diagnosis as a SetupError; other errors pass.
func bwrapErr(err error) error {
	var be *bwrap.SetupError
	if errors.As(err, &be) {
		return &SetupError{What: be.What, Why: be.Why, Fix: be.Fix, Err: be}
	}
	return err
}

// readbackOf is init's read-back as the report's; nil for nil.
func readbackOf(rb *initproc.Readback) *Readback {
	if rb == nil {
		return nil
	}
	out := &Readback{PID: rb.PID, UID: rb.UID, GID: rb.GID, NoNewPrivs: rb.NoNewPrivs, Seccomp: rb.Seccomp,
		CapEff: rb.CapEff, CapBnd: rb.CapBnd, UIDMap: rb.UIDMap, Namespaces: rb.Namespaces}
	if k := rb.Kernel; k != nil {
		out.Kernel = &Kernel{Uname: k.Uname, ProcVersion: k.ProcVersion, Dmesg: k.Dmesg}
	}
	return out
}

// inotifyLost names the inotify ceiling as not held in rep (enforced
// "none") and says why in a note: a default that could not be had is
// named as lost, never claimed.
func inotifyLost(rep *Report, why error) {
	for i, l := range rep.Limits {
		if l.Name == "inotify_instances" || l.Name == "inotify_watches" {
			rep.Limits[i].Enforced = "none"
		}
	}
	rep.Notes = append(rep.Notes, "the inotify ceiling is not held: "+why.Error())
}
