//go:build !linux && !darwin

package sandbox

import (
	"github.com/sandbox-run/sandbox-run/internal/mechanism"
	"github.com/sandbox-run/sandbox-run/internal/mechanism/off"
	"github.com/sandbox-run/sandbox-run/policy"
)

// mechanisms are this platform's: tier 0 alone, asked for by name; auto
// finds none.
func mechanisms() map[policy.Mode]mechanism.New {
	return map[policy.Mode]mechanism.New{policy.ModeOff: off.New}
}

// shownInside is nil: no mechanism here decides visibility.
func shownInside(policy.Policy) func(string) bool { return nil }
