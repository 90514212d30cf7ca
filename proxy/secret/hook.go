package secret

import (
	"net/http"
)

// RequestHook returns the function the egress proxy calls on each request
// it sees in clear, before forwarding it (proxy.Config.RequestHook for
// terminated connections, overTLS true; PlainRequestHook for plain HTTP,
// overTLS false): it applies the Set (see Apply) and returns the refusal,
// if any, as its error, whose text names the secret and the host, never a
// value. record, when not nil, is told every request that carried a
// placeholder, swapped or refused, with the request's method and path
// (never its query or headers). A nil Set returns nil.
func (s *Set) RequestHook(overTLS bool, record func(d Decision, method, host, path string)) func(*http.Request, string) error {
	if s == nil {
		return nil
	}
	return func(r *http.Request, host string) error {
		d := s.Apply(r, host, overTLS)
		if record != nil && (d.Refused != nil || len(d.Swapped) > 0) {
			record(d, r.Method, host, r.URL.EscapedPath())
		}
		if d.Refused != nil {
			return d.Refused
		}
		return nil
	}
}

// ResponseHook returns ScrubResponse as a proxy.Config.ResponseHook; nil
// for a nil Set.
func (s *Set) ResponseHook() func(*http.Response) error {
	if s == nil {
		return nil
	}
	return func(resp *http.Response) error {
		s.ScrubResponse(resp)
		return nil
	}
}
