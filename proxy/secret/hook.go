package secret

import (
	"net/http"
	"strings"
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
		// The proxy names the host without its port; r.URL holds the
		// checked host:port the request is forwarded to.
		if r.URL.Host != "" {
			host = r.URL.Host
		}
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

// GitCredentialConfig returns git configuration (keys and values, for
// GIT_CONFIG_COUNT, GIT_CONFIG_KEY_n and GIT_CONFIG_VALUE_n: nothing is
// written to a file) that makes git over HTTPS to each of hosts
// (host[:port]) answer a credential request with the user x-access-token
// and the password in the variable name: the placeholder, which the proxy
// swaps.
func GitCredentialConfig(name string, hosts []string) (keys, values []string) {
	for _, h := range hosts {
		host, port := splitPort(h, "443")
		if strings.Contains(host, "*") {
			continue
		}
		if port != "443" {
			host += ":" + port
		}
		keys = append(keys, "credential.https://"+host+".helper")
		values = append(values, `!f() { test "$1" = get || return 0; echo username=x-access-token; echo "password=$`+name+`"; }; f`)
	}
	return keys, values
}
