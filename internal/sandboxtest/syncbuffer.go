package sandboxtest

import (
	"bytes"
	"sync"
)

// SyncBuffer is a bytes.Buffer that a server goroutine may write while a
// test reads it (an audit, a log). Its zero value is ready to use.
type SyncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *SyncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

// String returns what was written so far.
func (s *SyncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}
