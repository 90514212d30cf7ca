//go:build !linux

package sandbox

import "github.com/sandbox-run/sandbox-run/internal/mechanism"

// lendsOwner reports whether m honours --map-owner: only bwrap on Linux.
func lendsOwner(mechanism.Mechanism) bool { return false }
