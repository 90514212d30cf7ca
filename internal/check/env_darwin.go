package check

import (
	"context"
	"errors"
	"fmt"
	"os"
	"runtime"
	"slices"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/sandbox-run/sandbox-run/policy"
	"github.com/sandbox-run/sandbox-run/report"
)

const (
	sandboxExec = "/usr/bin/sandbox-exec"
	logTool     = "/usr/bin/log"
)

// environment probes what the macOS tier 1 (Seatbelt) needs on this
// machine and sets up one real sandbox. ready says the self-test can run.
// The sandbox is tried only when sandbox-exec is usable: without it the
// attempt could only fail.
//
// Nothing here has run on a Mac yet (docs/seatbelt.md): it compiles and
// vets for darwin, and is written from the runner in sandbox_darwin.go.
func environment(ctx context.Context, binary string) (items []Item, mechanism string, ready bool) {
	items = append(items, timed(platformItem))
	seatbelt := timed(sandboxExecItem)
	items = append(items, seatbelt, timed(denialLogItem), unverifiedItem(),
		timed(userItem), protectedPathsItem(), gapsItem())
	if seatbelt.Status == StatusFail {
		return items, "none", false
	}
	it := timed(func() Item { return sandboxItem(ctx, binary) })
	items = append(items, it)
	return items, "seatbelt", it.Status == StatusOK
}

// sandboxItem sets up one real Seatbelt sandbox with the binary under test
// and checks its report. Unlike bwrap's, nothing of it can be read back
// from inside (no /proc): the self-test's attempts are the evidence.
func sandboxItem(ctx context.Context, binary string) Item {
	it := Item{ID: "sandbox", Category: "sandbox"}
	fail := func(summary, fix string) Item {
		it.Status, it.Summary, it.Remediation = StatusFail, summary, fix
		return it
	}
	r, summary, fix := sandboxReport(ctx, binary, "a Seatbelt sandbox")
	if r == nil {
		return fail(summary, fix)
	}
	var problems []string
	if r.Tier != 1 || r.Mechanism != "seatbelt" {
		problems = append(problems, fmt.Sprintf("tier %d mechanism %s", r.Tier, r.Mechanism))
	}
	if !slices.ContainsFunc(r.Protections, func(p report.Protection) bool { return p.Name == "seatbelt_profile" && p.Configured }) {
		problems = append(problems, "no Seatbelt profile in the report")
	}
	if os.Geteuid() == 0 && r.HostUID == 0 {
		problems = append(problems, "the command ran as uid 0")
	}
	if len(problems) > 0 {
		return fail("the sandbox is not what tier 1 needs: "+strings.Join(problems, "; "), "report this as a bug in sandbox-run with the output of check --json")
	}
	it.Status = StatusOK
	it.Summary = fmt.Sprintf("Seatbelt sandbox set up (sandbox-exec accepted the profile and ran /usr/bin/true as uid %d); nothing can be read back from inside, so the self-test is the evidence", r.HostUID)
	it.Details = r.Notes
	return it
}

// platformItem names the OS, architecture and macOS and Darwin releases,
// the first thing a bug report about a refusal needs.
func platformItem() Item {
	product, _ := unix.Sysctl("kern.osproductversion")
	release, _ := unix.Sysctl("kern.osrelease")
	if product == "" {
		product = "version unknown"
	}
	return Item{ID: "platform", Category: "host", Status: StatusOK,
		Summary: fmt.Sprintf("%s/%s, macOS %s, Darwin %s", runtime.GOOS, runtime.GOARCH, product, release)}
}

// sandboxExecItem fails when /usr/bin/sandbox-exec is missing or not an
// executable file: every Seatbelt sandbox is started through it.
func sandboxExecItem() Item {
	it := Item{ID: "sandbox-exec", Category: "seatbelt"}
	fi, err := os.Stat(sandboxExec)
	switch {
	case err != nil:
		cause := err // "no such file or directory", not the path again
		if u := errors.Unwrap(err); u != nil {
			cause = u
		}
		it.Status, it.Summary = StatusFail, sandboxExec+" is missing: "+cause.Error()
		it.Remediation = "sandbox-exec ships with every macOS release; this system's is gone or hidden, so no Seatbelt sandbox can be set up"
	case fi.IsDir() || fi.Mode()&0o111 == 0:
		it.Status, it.Summary = StatusFail, sandboxExec+" is not an executable file"
		it.Remediation = "restore /usr/bin/sandbox-exec (it is part of the sealed system volume)"
	default:
		it.Status, it.Summary = StatusOK, sandboxExec+" present"
		it.Details = []string{"sandbox-exec and SBPL are deprecated, undocumented Apple interfaces; a macOS release can change them"}
	}
	return it
}

// denialLogItem warns when /usr/bin/log is missing: confinement does not
// need it, but without it Seatbelt's denials cannot reach the audit log.
func denialLogItem() Item {
	it := Item{ID: "denial-log", Category: "seatbelt"}
	if _, err := os.Stat(logTool); err != nil {
		it.Status, it.Summary = StatusWarn, logTool+" is missing: Seatbelt's denials cannot be read back into the audit log"
		it.Remediation = "nothing to do for confinement; --audit will say that denials were not read back"
		return it
	}
	it.Status, it.Summary = StatusOK, logTool+" present: denials are read back from the unified log (best effort: it is lossy and late)"
	return it
}

// unverifiedItem says, as a warning on every run, that this tier has not
// been proven on a Mac by the project: honesty about the evidence.
func unverifiedItem() Item {
	return Item{ID: "seatbelt-unverified", Category: "seatbelt", Status: StatusWarn,
		Summary:     "the Seatbelt tier has not been run on a Mac by the sandbox-run project yet: the self-test below is the only evidence for this node",
		Details:     []string{"see docs/seatbelt.md for what is proven on Linux and what is only reasoned"},
		Remediation: "run scripts/test-macos.sh and report the result"}
}

// userItem says which uid the command will run as: Seatbelt does not
// change it, except that root's command runs as the default uid.
func userItem() Item {
	if os.Geteuid() == 0 {
		return Item{ID: "user", Category: "host", Status: StatusOK,
			Summary: fmt.Sprintf("running as root: the command runs as uid %d (--user to change), never as uid 0", policy.DefaultUID)}
	}
	return Item{ID: "user", Category: "host", Status: StatusOK,
		Summary: fmt.Sprintf("running as uid %d: the command runs as uid %d, confined by the profile (Seatbelt does not change the uid)", os.Getuid(), os.Getuid())}
}

// protectedPathsItem lists the paths never writable by default. It probes
// nothing, so it is not timed.
func protectedPathsItem() Item {
	return Item{ID: "protected-paths", Category: "policy", Status: StatusOK,
		Summary: fmt.Sprintf("Protected paths: on (%d paths never writable in any writable directory)", len(policy.DefaultProtected())),
		Details: policy.DefaultProtected()}
}

// gapsItem lists what Seatbelt does not give that bwrap does, so nobody
// reads tier 1 on a Mac as the same isolation as on Linux.
func gapsItem() Item {
	return Item{ID: "seatbelt-gaps", Category: "seatbelt", Status: StatusOK,
		Summary: "known gaps of Seatbelt against bwrap, shown as warnings in the self-test when it runs them",
		Details: []string{
			"no PID namespace: a process that leaves the command's session outlives the run",
			"no private /tmp: TMPDIR is a private directory, its size uncapped",
			"no seccomp equivalent: the system-call surface is what Seatbelt checks",
			"the egress proxy's loopback port is reachable by other local processes",
			"resource limits (--memory, --pids, --nofile, --fsize, --cpu-time) are refused",
		}}
}
