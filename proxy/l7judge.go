package proxy

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net/http"
	"net/http/httputil"
	"net/url"
	"strings"
	"time"

	"github.com/sandbox-run/sandbox-run/httprule"
)

// l7Verdict is the outcome of judging one request in clear.
type l7Verdict struct {
	d         *decision // the connection's (CONNECT's) or the request's address decision
	method    string
	path      string // canonical; the raw request path when it did not normalise
	rule      string // the rule that allowed it
	reason    string // refusal code; "" when allowed
	fix       string // on a refusal by the rules: the --allow-http flag that would allow it
	status    int
	body      string
	canonical bool
	h2        bool // the client speaks HTTP/2
}

type l7Key struct{}

// judgeL7 decides a request to a terminated (or, for plain HTTP, ruled)
// host: the Host header must name the checked target, the path must
// normalise, and a rule must match when the host has any. It writes the
// audit line and, on refusal, the response; ok reports whether the
// request may go on, with v.path the canonical path to forward.
func (p *Proxy) judgeL7(w http.ResponseWriter, r *http.Request, d *decision) (v *l7Verdict, ok bool) {
	v = &l7Verdict{d: d, method: r.Method, h2: r.ProtoMajor == 2}
	rawPath, _, _ := strings.Cut(r.RequestURI, "?")
	v.path = rawPath
	defer func() {
		p.recordL7(v)
		if v.reason != "" {
			writeL7Refusal(w, r, v)
		}
	}()
	if ht, err := parseTarget(r.Host, d.t.Port()); err != nil || ht != d.t {
		v.reason, v.status = reasonHostMismatch, http.StatusMisdirectedRequest
		v.body = fmt.Sprintf("the request's Host %q is not %s, the host this connection was opened to and checked for; send each host's requests on a connection to that host", r.Host, d.t)
		return v, false
	}
	canon, err := httprule.Normalize(rawPath)
	if err != nil {
		v.reason, v.status = reasonBadPath, http.StatusForbidden
		v.body = fmt.Sprintf("the path %q is refused: %v; send the path with plain slashes and without encoded '/' or '\\'", rawPath, err)
		return v, false
	}
	v.path, v.canonical = canon, true
	if p.l7.rules.Covers(d.t) {
		rule, ok := p.l7.rules.Judge(r.Method, d.t, canon)
		if !ok {
			v.reason, v.status, v.fix = reasonHTTPRule, http.StatusForbidden, httprule.Suggest(r.Method, d.t, canon)
			v.body = fmt.Sprintf("no --allow-http rule allows %s %s%s (rules for this host: %s)\nto allow it: add %s",
				r.Method, hostHeader(d.t), canon, strings.Join(p.rulesFor(d.t), "; "), v.fix)
			return v, false
		}
		v.rule = rule.String()
	}
	return v, true
}

// rulesFor lists the rules naming t.
func (p *Proxy) rulesFor(t target) []string {
	var out []string
	for _, r := range p.l7.rules.Rules() {
		if r.Host() == t {
			out = append(out, "'"+r.String()+"'")
		}
	}
	return out
}

func writeL7Refusal(w http.ResponseWriter, r *http.Request, v *l7Verdict) {
	body := fmt.Sprintf("sandbox-run egress proxy refused %s %s%s\nreason: %s\n%s\n", v.method, hostHeader(v.d.t), v.path, v.reason, v.body)
	resp := textResponse(r, v.status, body)
	resp.Header.Set(RefusalHeader, v.reason)
	// The connection stays open: a refusal ends one request, and HTTP/2
	// carries no Connection header.
	resp.Header.Del("Connection")
	writeResponse(w, resp)
}

// serve handles one request on a terminated connection.
func (tm *terminator) serve(w http.ResponseWriter, r *http.Request) {
	p := tm.s.p
	d, ok := r.Context().Value(termKey{}).(*decision)
	if !ok {
		http.Error(w, "BUG(sandbox-run): terminated connection without a decision", http.StatusInternalServerError)
		return
	}
	v, ok := p.judgeL7(w, r, d)
	if !ok {
		return
	}
	if p.l7.hook != nil {
		out := r.Clone(r.Context())
		out.URL = upstreamURL("https", d, v.path, r.URL.RawQuery)
		out.Host, out.RequestURI = hostHeader(d.t), ""
		if err := p.l7.hook(out, d.t.Host()); err != nil {
			hv := &l7Verdict{d: d, method: r.Method, path: v.path, rule: v.rule, reason: reasonHook,
				status: http.StatusForbidden, body: err.Error(), canonical: true}
			p.recordL7(hv)
			writeL7Refusal(w, r, hv)
			return
		}
		r = out
	}
	ctx := context.WithValue(context.WithValue(r.Context(), decisionKey{}, d), l7Key{}, v)
	tm.fwd.ServeHTTP(w, r.WithContext(ctx))
}

// rewrite points a judged request at its checked upstream with the
// canonical path: what was judged is what is forwarded.
func (tm *terminator) rewrite(pr *httputil.ProxyRequest) {
	v := pr.In.Context().Value(l7Key{}).(*l7Verdict)
	pr.Out.URL = upstreamURL("https", v.d, v.path, pr.In.URL.RawQuery)
	pr.Out.Host = hostHeader(v.d.t)
}

// upstreamError answers a judged request whose upstream failed. An
// upstream whose certificate does not verify is refused (502, code
// upstream-unverified) and audited: its answer never reaches the client.
func (tm *terminator) upstreamError(w http.ResponseWriter, r *http.Request, err error) {
	v, _ := r.Context().Value(l7Key{}).(*l7Verdict)
	if v == nil {
		writeResponse(w, failedResponse(r, r.Method+" "+r.Host, err))
		return
	}
	// A transport error may quote the request's URL, whose query a hook
	// may have filled with a secret: keep only the cause.
	var ue *url.Error
	if errors.As(err, &ue) {
		err = ue.Err
	}
	fv := *v
	fv.rule, fv.status = v.rule, http.StatusBadGateway
	fv.reason, fv.body = reasonUpstreamError, fmt.Sprintf("the upstream exchange failed: %v", err)
	if isVerifyError(err) {
		fv.reason = reasonUnverified
		fv.body = fmt.Sprintf("the upstream %s did not present a certificate that verifies against the proxy's roots: %v\nto allow it: fix the server's certificate, or pass --upstream-ca FILE with the CA that signed it", v.d.t, err)
	}
	if errors.Is(err, errDialRefused) {
		fv.reason, fv.status = reasonDialRefused, http.StatusForbidden
	}
	tm.s.p.recordL7(&fv)
	writeL7Refusal(w, r, &fv)
}

func isVerifyError(err error) bool {
	var (
		ua  x509.UnknownAuthorityError
		ci  x509.CertificateInvalidError
		he  x509.HostnameError
		cve *tls.CertificateVerificationError
	)
	return errors.As(err, &ua) || errors.As(err, &ci) || errors.As(err, &he) || errors.As(err, &cve)
}

// l7AuditLine is an "http_request" audit line: one per decision on a
// request seen in clear.
type l7AuditLine struct {
	Time     string `json:"time"`
	RunID    string `json:"run_id,omitempty"`
	Event    string `json:"event"`
	Method   string `json:"method"`
	Host     string `json:"host"`
	Port     int    `json:"port"`
	Path     string `json:"path"`
	Rule     string `json:"rule,omitempty"`
	Decision string `json:"decision"`
	Reason   string `json:"reason"`
	Detail   string `json:"detail,omitempty"`
	Fix      string `json:"fix,omitempty"` // on a refusal by the rules: the exact flag that would allow it
}

// recordL7 writes v to the audit log and counts it.
func (p *Proxy) recordL7(v *l7Verdict) {
	line := l7AuditLine{
		Time: time.Now().UTC().Format(time.RFC3339Nano), RunID: p.lineRunID(v.d), Event: "http_request",
		Method: v.method, Host: v.d.t.Host(), Port: int(v.d.t.Port()), Path: v.path, Rule: v.rule,
		Decision: "allow", Reason: "http-rule",
	}
	if v.rule == "" {
		line.Reason = "terminated"
	}
	if v.reason != "" {
		p.counts.refused.Add(1)
		line.Decision, line.Reason, line.Fix = "refuse", v.reason, v.fix
		if v.reason == reasonHook || v.reason == reasonUnverified || v.reason == reasonUpstreamError {
			line.Detail = v.body
		}
		p.log.Info("http request refused", "method", v.method, "host", line.Host, "path", line.Path, "reason", v.reason)
	}
	p.writeAudit(line)
}

// judgePlain judges an absolute-form (plain HTTP) request to a host with
// rules, and on success rewrites r's URL to the canonical path.
func (p *Proxy) judgePlain(w http.ResponseWriter, r *http.Request, d *decision) bool {
	// An absolute-form request's RequestURI is the whole URL; judge its
	// path as an origin-form request's.
	rr := *r
	rr.RequestURI = r.URL.EscapedPath()
	if r.URL.RawQuery != "" {
		rr.RequestURI += "?" + r.URL.RawQuery
	}
	if r.URL.RawPath == "" && r.URL.Path == "" {
		rr.RequestURI = "/"
	}
	v, ok := p.judgeL7(w, &rr, d)
	if ok {
		r.URL.Path, r.URL.RawPath = v.path, ""
	}
	return ok
}
