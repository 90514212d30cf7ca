package secret

import (
	"bytes"
	"io"
	"net/http"
	"strings"
)

// ScrubResponse replaces every real value of the Set with its placeholder
// in resp's header values and, unless the body is compressed
// (Content-Encoding other than identity), in its body as it streams: what
// an upstream echoes back never reaches the sandbox as the real value. A
// placeholder has its value's length, so Content-Length stays right. Bytes
// that could begin a real value are held back only until the next read
// tells them apart; everything else is passed on at once (a stream is not
// delayed). It reports whether the body could be scrubbed. A nil Set
// scrubs nothing and reports true.
func (s *Set) ScrubResponse(resp *http.Response) bool {
	if s == nil || len(s.items) == 0 {
		return true
	}
	for _, vs := range resp.Header {
		for i, v := range vs {
			vs[i] = s.toPlaceholders(v)
		}
	}
	if ce := resp.Header.Get("Content-Encoding"); ce != "" && !strings.EqualFold(ce, "identity") {
		return false
	}
	if resp.Body != nil && resp.Body != http.NoBody {
		resp.Body = &scrubReader{s: s, r: resp.Body}
	}
	return true
}

func (s *Set) toPlaceholders(v string) string {
	for _, it := range s.items {
		v = strings.ReplaceAll(v, it.real, it.placeholder)
	}
	return v
}

// scrubReader replaces real values by placeholders in a stream.
type scrubReader struct {
	s    *Set
	r    io.ReadCloser
	buf  []byte // read, replaced, not yet returned
	hold int    // bytes at buf's end that may begin a real value
	err  error
}

func (z *scrubReader) Read(p []byte) (int, error) {
	for len(z.buf)-z.hold == 0 && z.err == nil {
		chunk := make([]byte, 32<<10)
		n, err := z.r.Read(chunk)
		z.buf = append(z.buf, chunk[:n]...)
		z.err = err
		for _, it := range z.s.items {
			z.buf = bytes.ReplaceAll(z.buf, []byte(it.real), []byte(it.placeholder))
		}
		z.hold = 0
		if z.err == nil {
			z.hold = z.s.partialTail(z.buf)
		}
	}
	n := copy(p, z.buf[:len(z.buf)-z.hold])
	z.buf = z.buf[n:]
	if len(z.buf) == 0 && z.err != nil {
		return n, z.err
	}
	return n, nil
}

func (z *scrubReader) Close() error { return z.r.Close() }

// partialTail is the length of the longest end of b that is a proper
// beginning of some real value.
func (s *Set) partialTail(b []byte) int {
	best := 0
	for _, it := range s.items {
		for k := min(len(it.real)-1, len(b)); k > best; k-- {
			if bytes.HasSuffix(b, []byte(it.real[:k])) {
				best = k
				break
			}
		}
	}
	return best
}
