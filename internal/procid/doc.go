// Package procid names a process so that the name outlives pid reuse: its
// pid with its start time (clock ticks after boot, field 22 of
// /proc/PID/stat) and the boot's id. Run journals and the run directories
// in $TMPDIR carry such names, so that a later run can tell an ended run
// from a live one.
//
// Guarantees: a pid whose start time differs is another process; Alive
// never reports a process it cannot read. Non-guarantees: a process is
// read at the moment asked (it may end right after); the package is
// Linux's, reading /proc.
package procid
