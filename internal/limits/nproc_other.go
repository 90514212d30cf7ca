//go:build !linux

package limits

// NProcPerUserNS is Linux only: elsewhere RLIMIT_NPROC counts every process
// of the uid, so it reports false.
func NProcPerUserNS() bool { return false }
