// Package procid names a process so that the name outlives pid reuse and
// is only ever read where it means what it meant: its pid, its start time
// (clock ticks after boot, field 22 of /proc/PID/stat) and its namespace
// token, the identity of the pid namespace (and of the time namespace,
// when it is not the initial one) that the pid and the start time belong
// to. Run journals and the run directories in $TMPDIR carry such names
// (ID.String: PID.START.NS), so that a later run can tell an ended run
// from a live one.
//
// A pid is a number in one pid namespace: the same process is pid 2 in a
// sandbox and pid 4711 on the host, and the host's pid 2 is another
// process. A start time is read through the reader's time namespace. So a
// name is judged only by a Judge whose own token is the name's and whose
// /proc shows its own pid namespace; any other judge answers Unknown.
//
// Guarantees: Ended is answered only for a process that certainly no
// longer runs (a pid whose start time differs is another process; a
// process that /proc, being the judge's namespace's own, does not list is
// gone); a judge never answers Ended for a name made in another
// namespace, nor when its /proc is not its own namespace's. Legacy names
// (PID.START, of versions before the token) are judged as those versions
// did, as if made in the judge's namespace. A lock a run holds (HoldAt)
// is judged from any namespace (ProbeAt), Ended only once no process
// holds it.
//
// Non-guarantees: a process is read at the moment asked (it may end right
// after); a name made in another namespace is never judged Ended, even
// long after that namespace has gone (its holder must tell otherwise by a
// lock, as run journals and run directories do, or leave it); a lock
// tells only for an object its holder marks held, since one never held is
// free too; ID.String is only as unique as pid and start time (two
// processes of one namespace started in one clock tick with the same pid
// cannot be told apart, which pid reuse makes vanishingly rare); the
// package is Linux's, reading /proc.
package procid
