package check

import (
	"context"
	"fmt"
	"runtime"
	"strings"
	"time"

	llsys "github.com/landlock-lsm/go-landlock/landlock/syscall"
	"golang.org/x/sys/unix"

	"github.com/sandbox-run/sandbox-run/landlock"
)

// landlockItem says whether --sandbox landlock can run here and, when it
// can, lists what it loses against bwrap. It is information, never a
// failure: bwrap is the tier-1 mechanism check judges by default.
func landlockItem() Item {
	it := Item{ID: "landlock", Category: "sandbox", Status: StatusOK}
	abi, err := llsys.LandlockGetABIVersion()
	if err != nil {
		abi = 0
	}
	rs, err := landlock.Translate(landlock.Input{ABI: abi, ConnectPorts: []uint16{1}})
	if err != nil {
		// Without a network the ABI may still do.
		rs, err = landlock.Translate(landlock.Input{ABI: abi})
	}
	if err != nil {
		it.Summary = "--sandbox landlock is not available: " + err.Error()
		return it
	}
	it.Summary = fmt.Sprintf("--sandbox landlock is available (Landlock ABI %d, no user namespace needed), with %d named losses against bwrap; sandbox-run check --sandbox landlock tests it", abi, len(rs.Losses))
	if abi < landlock.NetABI {
		it.Summary += "; runs with a network need ABI 4"
	}
	for _, l := range rs.Losses {
		it.Details = append(it.Details, "loss: "+l.Name+": "+l.Detail)
	}
	return it
}

// landlockEnvironment is check --sandbox landlock's environment: the host,
// the landlock item, and one real landlock run read back.
func landlockEnvironment(ctx context.Context, binary string) (items []Item, mechanism string, ready bool) {
	var u unix.Utsname
	unix.Uname(&u)
	items = append(items, Item{ID: "platform", Category: "host", Status: StatusOK,
		Summary: fmt.Sprintf("%s/%s, kernel %s", runtime.GOOS, runtime.GOARCH, unix.ByteSliceToString(u.Release[:]))})
	items = append(items, landlockItem())
	start := time.Now()
	it := Item{ID: "sandbox", Category: "sandbox"}
	r, summary, fix := sandboxReport(ctx, binary, "a landlock sandbox", "--sandbox", "landlock")
	var problems []string
	switch {
	case r == nil:
		it.Status, it.Summary, it.Remediation = StatusFail, summary, fix
	case r.Tier != 1 || r.Mechanism != "landlock" || r.Landlock == nil || r.Seccomp == nil:
		problems = append(problems, fmt.Sprintf("tier %d mechanism %s", r.Tier, r.Mechanism))
	default:
		if r.Landlock.ReadbackNoNewPrivs != 1 {
			problems = append(problems, "NoNewPrivs is not 1")
		}
		if r.Seccomp.Readback != 2 {
			problems = append(problems, fmt.Sprintf("Seccomp mode is %d, not 2 (filter)", r.Seccomp.Readback))
		}
		if !r.Landlock.ReadbackRootDenied {
			problems = append(problems, "/ was not denied: Landlock did not hold")
		}
	}
	if len(problems) > 0 {
		it.Status, it.Summary, it.Remediation = StatusFail, "the landlock sandbox is not what it claims: "+strings.Join(problems, "; "), "report this as a bug in sandbox-run with the output of check --json"
	} else if r != nil {
		it.Status = StatusOK
		it.Summary = fmt.Sprintf("landlock sandbox set up and read back before exec: uid %d, NoNewPrivs 1, Seccomp 2, / denied (Landlock ABI %d)", r.HostUID, r.Landlock.ABI)
		for _, l := range r.Losses {
			it.Details = append(it.Details, "loss: "+l.Name+": "+l.Detail)
		}
	}
	it.DurationMS = time.Since(start).Milliseconds()
	items = append(items, it)
	return items, "landlock", it.Status == StatusOK
}
