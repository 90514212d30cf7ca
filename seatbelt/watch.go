package seatbelt

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync"
	"time"
)

// ErrStreamFailed marks a `log stream` that printed an error instead of
// its banner, or ended before printing it: no denial will be read back.
var ErrStreamFailed = errors.New("seatbelt: log stream failed")

// Watch reads the two outputs of one `log stream` process (LogStreamArgs).
// The process itself is the caller's to start and end; Watch only reads,
// so it runs the same against a recorded or constructed stream.
type Watch struct {
	started chan struct{}
	failed  chan string
	done    chan struct{}

	mu      sync.Mutex
	stats   StreamStats
	readErr error
}

// maxErrLine bounds the stderr line a failure quotes.
const maxErrLine = 200

// WatchStream starts reading stdout (the ndjson stream) and stderr. Every
// denial of tag goes to fn, from one goroutine, in order.
func WatchStream(stdout, stderr io.Reader, tag string, fn func(Denial)) *Watch {
	w := &Watch{started: make(chan struct{}), failed: make(chan string, 1), done: make(chan struct{})}
	var wg sync.WaitGroup
	wg.Add(2)
	go func() {
		defer wg.Done()
		var once sync.Once
		st, err := readStream(stdout, tag, func() { once.Do(func() { close(w.started) }) }, fn)
		w.mu.Lock()
		w.stats, w.readErr = st, err
		w.mu.Unlock()
	}()
	go func() {
		defer wg.Done()
		sc := bufio.NewScanner(stderr)
		sc.Buffer(make([]byte, 4096), 64<<10)
		for sc.Scan() {
			if l := strings.TrimSpace(sc.Text()); l != "" {
				if len(l) > maxErrLine {
					l = l[:maxErrLine] + "..."
				}
				select {
				case w.failed <- l:
				default:
				}
			}
		}
		io.Copy(io.Discard, stderr)
	}()
	go func() { wg.Wait(); close(w.done) }()
	return w
}

// WaitStart waits up to timeout for the stream to start. It returns true
// once the banner came; an error wrapping ErrStreamFailed when stderr
// printed a line first (the line is quoted) or both outputs ended without
// a banner; and false with no error when neither happened in time (the
// stream may still start; denials before then may be missing).
func (w *Watch) WaitStart(timeout time.Duration) (bool, error) {
	t := time.NewTimer(timeout)
	defer t.Stop()
	select {
	case <-w.started:
		return true, nil
	case l := <-w.failed:
		select {
		case <-w.started: // both came; the banner says it streams
			return true, nil
		default:
		}
		return false, fmt.Errorf("%w: %s", ErrStreamFailed, l)
	case <-w.done:
		select {
		case <-w.started:
			return true, nil
		case l := <-w.failed:
			return false, fmt.Errorf("%w: %s", ErrStreamFailed, l)
		default:
		}
		return false, fmt.Errorf("%w: it ended without its banner", ErrStreamFailed)
	case <-t.C:
		return false, nil
	}
}

// Done is closed once both outputs have been read to their end.
func (w *Watch) Done() <-chan struct{} { return w.done }

// Stats returns what the stream held; complete once Done is closed.
func (w *Watch) Stats() (StreamStats, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.stats, w.readErr
}
