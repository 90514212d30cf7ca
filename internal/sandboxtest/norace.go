//go:build !race

package sandboxtest

// Race says the race detector is on: tests that bound their waits scale
// them by Slowdown rather than fail on an instrumented binary's pace.
const Race = false

// Slowdown is how much longer a wait may take under the race detector.
const Slowdown = 1
