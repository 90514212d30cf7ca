package proxy

import (
	"bufio"
	"fmt"
	"io"
	"net/http"
	"strings"

	"github.com/sandbox-run/sandbox-run/internal/refusals"
)

// collected is r as the run's refusal collector keeps it.
func (r *refusal) collected(host string, port int) refusals.Refusal {
	return refusals.Refusal{Kind: refusals.KindConnect, Host: host, Port: port, Reason: r.reason, Why: r.rule, Fix: r.flag}
}

// reasonPhrase is the status line's reason phrase for a refusal: the
// standard text, then what would allow it. A CONNECT client (curl: "CONNECT
// tunnel failed, response 403") shows the status line but never the body,
// so the fix must ride in it too.
func (r *refusal) reasonPhrase() string {
	fix := "no flag allows it"
	if r.flag != "" {
		fix = "to allow it: " + r.flag
	}
	s := fmt.Sprintf("%s (sandbox-run %s; %s)", http.StatusText(r.status), r.reason, fix)
	// Nothing but printable ASCII in a status line.
	return strings.Map(func(c rune) rune {
		if c < 0x20 || c > 0x7e {
			return '?'
		}
		return c
	}, s)
}

// writeConnectRefusal answers a refused CONNECT with a status line whose
// reason phrase names the fix (net/http writes only the standard text, so
// the connection is taken over to write it) and the body refusalResponse
// writes, then closes the connection. A CONNECT has no body to drain.
// Where the connection cannot be taken over, the standard response is
// written.
func writeConnectRefusal(w http.ResponseWriter, req *http.Request, d *decision) {
	resp := refusalResponse(req, d)
	hj, ok := w.(http.Hijacker)
	if !ok {
		writeResponse(w, resp)
		return
	}
	c, buf, err := hj.Hijack()
	if err != nil {
		writeResponse(w, resp)
		return
	}
	defer c.Close()
	writeRaw(buf.Writer, resp, d.refusal.reasonPhrase())
}

// writeRaw writes resp with phrase as its reason phrase and flushes bw.
func writeRaw(bw *bufio.Writer, resp *http.Response, phrase string) {
	fmt.Fprintf(bw, "HTTP/1.1 %d %s\r\n", resp.StatusCode, phrase)
	_ = resp.Header.Write(bw)
	io.WriteString(bw, "\r\n")
	_, _ = io.Copy(bw, resp.Body)
	_ = bw.Flush()
}
