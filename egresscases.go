// Package sandboxrun holds what must live at the top of the repository:
// egress-cases.json, the escape matrix, embedded so that every build of
// sandbox-run carries the cases it can run (package check parses it).
package sandboxrun

import _ "embed"

// EgressCases is the escape matrix, egress-cases.json, as written.
//
//go:embed egress-cases.json
var EgressCases []byte
