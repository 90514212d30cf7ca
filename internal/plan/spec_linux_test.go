package plan

import (
	"github.com/sandbox-run/sandbox-run/bwrap"
	"github.com/sandbox-run/sandbox-run/mount"
)

// The run's descriptors and inside paths the layout goldens render, as
// sandbox's bwrap mechanism sets them (sandbox_linux.go's fdInfo,
// fdSeccomp, fdBinds; net_linux.go's egressInside, llmInside;
// githint_linux.go's gitHintDir). They are copied here because the plan
// package may not import sandbox; a change there is a change of the
// goldens' argument stream, to be made here too.
const (
	fdInfo       = 6
	fdSeccomp    = 8
	fdBinds      = 9
	egressInside = "/run/sandbox-run/egress.sock"
	llmInside    = "/run/sandbox-run/llm.sock"
	gitHintDir   = "/.sandbox-run/bin"
)

// bwrapSpec is sandbox's bwrapSpec (bwrap_linux.go), copied for the same
// reason: the whole of what bwrap is asked for, given its features.
func bwrapSpec(f bwrap.Features, asPid1 bool, mounts []mount.Step, workdir string, env []string) bwrap.Spec {
	return bwrap.Spec{
		AsPid1:           asPid1,
		UnshareCgroupTry: f.UnshareCgroupTry,
		DisableUserns:    f.DisableUserns,
		UID:              -1, GID: -1,
		Hostname:   "sandbox",
		Mounts:     mounts,
		Chdir:      workdir,
		ClearEnv:   f.ClearEnv,
		Env:        env,
		SeccompFD:  fdSeccomp,
		InfoFD:     fdInfo,
		SizeOption: f.Size,
	}
}
