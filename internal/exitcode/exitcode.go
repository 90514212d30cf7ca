// Package exitcode is the one table of the exit statuses sandbox-run gives
// by itself (the CLI contract of docs/cli.md) and the one mapping of a
// death by signal to a status. Every package that returns, compares or
// explains such a status names it from here; sandbox and internal/cli
// re-export the constants under their own names, never with their own
// numbers.
//
// Guarantees: the numbers are those of timeout(1), env(1) and POSIX shells
// (124 timeout, 126 not executable, 127 not found, 128+N signal N), plus
// 125 for a refusal or a failed set-up, as podman and docker run use it.
// Non-guarantees: a command may exit with any of these numbers by itself;
// only the report's exit class (or --exit-code-refusal) tells them apart.
package exitcode

const (
	// Timeout is the status of a run the policy's timeout ended.
	Timeout = 124
	// Setup is the status of a run sandbox-run refused or could not set
	// up (the command never ran), or whose mechanism was killed.
	Setup = 125
	// NotExecutable is the status of a command found but not executable
	// inside.
	NotExecutable = 126
	// NotFound is the status of a command not found inside.
	NotFound = 127

	// signalBase is added to a signal's number: a command that died of
	// signal N exits 128+N.
	signalBase = 128
	// maxSignal is the highest signal number Linux and macOS have
	// (SIGRTMAX is 64).
	maxSignal = 64
)

// OfSignal returns the status of a command that died of signal sig: 128+sig.
func OfSignal(sig int) int { return signalBase + sig }

// Signal returns N for a status 128+N with N a signal number (1 to 64);
// ok is false for every other status (a command's own exit).
func Signal(code int) (sig int, ok bool) {
	if code > signalBase && code <= signalBase+maxSignal {
		return code - signalBase, true
	}
	return 0, false
}
