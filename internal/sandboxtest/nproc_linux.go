package sandboxtest

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"
)

// ProcessCount makes t take its turn among the tests, in every test binary
// of this user, that fill or cap the host's per-uid process count.
//
// RLIMIT_NPROC is checked against every process of a uid on the host (and,
// for a user namespace, against the count of its creator's uid), so a fork
// loop of 3000 sandboxed processes in one package's run makes a small
// NPROC in another package's run refuse its first fork. go test runs
// packages in parallel; these tests hold an exclusive lock on one file
// instead, released when t ends. The wait is bounded: after 10 minutes t
// fails rather than hangs.
func ProcessCount(t testing.TB) {
	t.Helper()
	p := filepath.Join(os.TempDir(), fmt.Sprintf("sandbox-run-test-nproc-%d.lock", os.Getuid()))
	f, err := os.OpenFile(p, os.O_CREATE|os.O_RDWR|syscall.O_NOFOLLOW, 0o600)
	if err != nil {
		t.Fatalf("sandboxtest: process-count lock: %v", err)
	}
	deadline := time.Now().Add(10 * time.Minute)
	for {
		err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
		if err == nil {
			break
		}
		if !errors.Is(err, syscall.EWOULDBLOCK) || time.Now().After(deadline) {
			f.Close()
			t.Fatalf("sandboxtest: process-count lock %s: %v", p, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Cleanup(func() { f.Close() })
}
