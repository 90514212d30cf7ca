package proxy

import (
	"net/http"
)

// runPlainHook calls Config.PlainRequestHook on an allowed plain-HTTP
// request. A refusal is answered and audited like a RequestHook refusal
// (403, reason hook-refused, the error's text as detail); it reports
// whether the request may go on.
func (p *Proxy) runPlainHook(w http.ResponseWriter, r *http.Request, d *decision) bool {
	if p.plainHook == nil {
		return true
	}
	err := p.plainHook(r, d.t.Host())
	if err == nil {
		return true
	}
	v := &l7Verdict{d: d, method: r.Method, path: r.URL.EscapedPath(), reason: reasonHook,
		status: http.StatusForbidden, body: err.Error()}
	p.recordL7(v)
	writeL7Refusal(w, r, v)
	return false
}
