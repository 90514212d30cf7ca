package sandbox

import (
	"github.com/sandbox-run/sandbox-run/internal/mechanism"
	"github.com/sandbox-run/sandbox-run/internal/mechanism/gvisor"
	"github.com/sandbox-run/sandbox-run/internal/mechanism/landlock"
	"github.com/sandbox-run/sandbox-run/internal/mechanism/off"
	"github.com/sandbox-run/sandbox-run/internal/mechanism/seatbelt"
	"github.com/sandbox-run/sandbox-run/policy"
)

// mechanisms are macOS's, by the mode that names each: auto is Seatbelt.
// Landlock and gVisor name their own refusal (Linux only).
func mechanisms() map[policy.Mode]mechanism.New {
	return map[policy.Mode]mechanism.New{
		policy.ModeAuto:     seatbelt.New,
		policy.ModeSeatbelt: seatbelt.New,
		policy.ModeLandlock: landlock.New,
		policy.ModeGvisor:   gvisor.New,
		policy.ModeOff:      off.New,
	}
}

// shownInside is nil: Seatbelt's profile, not a mount plan, decides what
// the command sees.
func shownInside(policy.Policy) func(string) bool { return nil }
