package httprule

import (
	"errors"
	"net/url"
	"strings"
)

// ErrAmbiguousPath is wrapped by Normalize's errors: the path could be read
// two ways, so it is refused rather than judged one way and served another.
var ErrAmbiguousPath = errors.New("ambiguous request path")

// Normalize turns an escaped request path (url.URL.EscapedPath, or the
// raw request target's path) into the canonical form rules are matched
// on and that is forwarded: decoded, one slash between segments, "." and
// ".." resolved (".." at the root stays at the root), a trailing slash
// kept. It refuses, wrapping ErrAmbiguousPath, a path that does not start
// with "/", that holds an encoded slash (%2F), an encoded or literal
// backslash, an encoded NUL or control character, or a bad escape.
func Normalize(escaped string) (string, error) {
	if !strings.HasPrefix(escaped, "/") {
		return "", errors.Join(ErrAmbiguousPath, errors.New("the path does not start with /"))
	}
	lower := strings.ToLower(escaped)
	for _, bad := range []string{"%2f", "%5c", "\\"} {
		if strings.Contains(lower, bad) {
			return "", errors.Join(ErrAmbiguousPath, errors.New("an encoded slash or a backslash: servers split it differently"))
		}
	}
	dec, err := url.PathUnescape(escaped)
	if err != nil {
		return "", errors.Join(ErrAmbiguousPath, err)
	}
	for _, c := range []byte(dec) {
		if c < ' ' || c == 0x7f {
			return "", errors.Join(ErrAmbiguousPath, errors.New("a control character in the path"))
		}
	}
	var out []string
	for seg := range strings.SplitSeq(dec, "/") {
		switch seg {
		case "", ".":
		case "..":
			if len(out) > 0 {
				out = out[:len(out)-1]
			}
		default:
			out = append(out, seg)
		}
	}
	p := "/" + strings.Join(out, "/")
	if len(out) > 0 && trailingSlash(dec) {
		p += "/"
	}
	return p, nil
}

// trailingSlash reports whether a decoded path ends in a directory: a
// slash, or a dot segment ("/a/." and "/a/b/.." name a directory).
func trailingSlash(dec string) bool {
	return strings.HasSuffix(dec, "/") || strings.HasSuffix(dec, "/.") || strings.HasSuffix(dec, "/..")
}
