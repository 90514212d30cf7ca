package sandbox

import (
	"github.com/sandbox-run/sandbox-run/internal/mechanism"
	"github.com/sandbox-run/sandbox-run/internal/mechanism/bwrap"
	"github.com/sandbox-run/sandbox-run/internal/mechanism/gvisor"
	"github.com/sandbox-run/sandbox-run/internal/mechanism/landlock"
	"github.com/sandbox-run/sandbox-run/internal/mechanism/off"
	"github.com/sandbox-run/sandbox-run/internal/plan"
	"github.com/sandbox-run/sandbox-run/policy"
)

// mechanisms are Linux's, by the mode that names each: auto is bwrap
// (tier 1), never a weaker one in its place.
func mechanisms() map[policy.Mode]mechanism.New {
	return map[policy.Mode]mechanism.New{
		policy.ModeAuto:     bwrap.New,
		policy.ModeBwrap:    bwrap.New,
		policy.ModeLandlock: landlock.New,
		policy.ModeGvisor:   gvisor.New,
		policy.ModeOff:      off.New,
	}
}

// shownInside reports whether a host path is visible inside a bwrap
// sandbox under p (plan.ShownInside).
func shownInside(p policy.Policy) func(string) bool { return plan.ShownInside(p) }
