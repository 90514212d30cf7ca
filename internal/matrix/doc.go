// Package matrix is the escape matrix behind sandbox-run check: the cases
// of egress-cases.json (Load, Parse, Coverage) and the runner that makes
// each attempt unconfined first (the positive control) and then in a real
// sandbox, through the sandbox-run binary, and judges it by what reached
// its canary (Run). The attempts themselves are internal/probe's; what
// the verdicts mean for a machine's tier is package check's.
//
// The guarantees of the runner (untested is not held; judged by the
// canary, not the probe; nothing left behind) are stated in package
// check's documentation, which is where a user reads them.
package matrix
