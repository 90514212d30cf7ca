package mechanism

import (
	"bytes"
	"io"
	"os"
	"strings"
	"sync"
)

func OrNull(f, null *os.File) *os.File {
	if f != nil {
		return f
	}
	return null
}

// StderrRelay passes bwrap's own stderr on once the command has started, and
// holds it before, so that a setup failure becomes one line of ours.
type StderrRelay struct {
	mu      sync.Mutex
	Out     *os.File
	started bool
	buf     bytes.Buffer
}

func (r *StderrRelay) Run(src io.Reader) {
	b := make([]byte, 32<<10)
	for {
		n, err := src.Read(b)
		if n > 0 {
			r.mu.Lock()
			if r.started {
				r.Out.Write(b[:n])
			} else if r.buf.Len() < 64<<10 {
				r.buf.Write(b[:n])
			}
			r.mu.Unlock()
		}
		if err != nil {
			return
		}
	}
}

func (r *StderrRelay) Start() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.started = true
	if r.buf.Len() > 0 {
		r.Out.Write(r.buf.Bytes())
		r.buf.Reset()
	}
}

func (r *StderrRelay) Held() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.buf.String()
}

func QuoteAll(a []string) []string {
	out := make([]string, len(a))
	for i, s := range a {
		out[i] = Quote(s)
	}
	return out
}

func Quote(s string) string {
	if s != "" && !strings.ContainsAny(s, " \t\n'\"\\$`*?[]{}()<>|&;#~!") {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}
