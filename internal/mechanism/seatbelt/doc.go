// Package seatbelt is the Seatbelt mechanism, tier 1 on macOS: the policy
// rendered as a Seatbelt profile (package seatbelt at the top of the
// module, imported here as sbpl) that sandbox-exec applies to the command,
// its network through loopback ports that sandbox-run serves, its
// denials read back from the unified log into the audit.
//
// It is built on macOS only but for reachableAs, the mode-bit check of
// what the sandbox's uid can reach, which is tested on Linux too. What it
// cannot hold against bwrap is named in the report's Losses and Notes.
package seatbelt
