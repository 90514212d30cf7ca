package mcp

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"strings"
)

// argsMode is how the audit records argument values.
type argsMode struct {
	mode int // argsOff, argsRedact or argsRaw
	max  int // the most bytes kept per call
}

const (
	argsOff = iota
	argsRedact
	argsRaw
)

// redacted replaces a value the redaction rule takes for a secret.
const redacted = "[redacted]"

// redact returns args with every value that looks like a secret replaced
// by "[redacted]", and how many were. The rule:
//
//   - the value of a member whose key, lower-cased without '-', '_' and
//     '.', contains password, passwd, passphrase, secret, token, credential,
//     cookie, session, auth, bearer, signature, apikey, accesskey or
//     privatekey, or ends in key, or is pwd or pin: whatever the value
//     (a whole object too);
//   - a key that is itself a secret by the rules below: the key becomes
//     "[redacted]" (with a number when several are), its value is judged
//     as any other;
//   - a string without spaces starting with a known token prefix (GitHub
//     ghp_ gho_ ghu_ ghs_ ghr_ github_pat_, GitLab glpat-, OpenAI/Anthropic/
//     Stripe sk- sk_ rk_, Slack xox?- and xapp-, AWS AKIA/ASIA, Google AIza
//     and ya29., npm_, pypi-, hf_, SendGrid SG., Shopify shp?_), a JWT
//     (eyJ with two dots) or a URL with a password (scheme://user:pass@);
//     a PEM block (-----BEGIN); "Bearer " or "Basic " and one credential;
//   - a string of 24 or more characters without whitespace, made of
//     letters, digits and + / = _ - . only, holding a letter and a digit,
//     not starting with '/', whose characters carry at least 4 bits of
//     entropy each (hex digests sit just under that; base64 keys over);
//   - inside a longer string, only the secret part (see redactInString):
//     a token of a known format anywhere in it, the credential after
//     "Authorization:", "Bearer" or "Basic", the value of an assignment
//     or option whose name says secret (AWS_SECRET_ACCESS_KEY=…,
//     --password=…, --token …, password: …), a URL's user and password,
//     and the value of a URL query parameter whose name says secret or
//     whose value looks like one.
//
// Non-guarantee: a secret that looks like prose, a short one, or one under
// an innocent name in an encoding of its own is kept. Members are
// re-encoded (keys sorted, numbers as written).
func redact(args json.RawMessage) (json.RawMessage, int, error) {
	d := json.NewDecoder(bytes.NewReader(args))
	d.UseNumber()
	var v any
	if err := d.Decode(&v); err != nil {
		return nil, 0, err
	}
	n := 0
	v = redactValue(v, &n)
	b, err := json.Marshal(v)
	return b, n, err
}

func redactValue(v any, n *int) any {
	switch t := v.(type) {
	case map[string]any:
		return redactObject(t, n)
	case []any:
		for i, e := range t {
			t[i] = redactValue(e, n)
		}
	case string:
		if secretValue(t) {
			*n++
			return redacted
		}
		return redactInString(t, n)
	}
	return v
}

func redactObject(t map[string]any, n *int) map[string]any {
	out := make(map[string]any, len(t))
	keys := 0
	for k, e := range t {
		if secretKey(k) && e != nil {
			e = redacted
			*n++
		} else {
			e = redactValue(e, n)
		}
		if secretValue(k) || redactInString(k, new(int)) != k {
			// The key is the secret: no part of it is kept.
			*n++
			keys++
			k = redacted
			if keys > 1 {
				k = fmt.Sprintf("[redacted %d]", keys)
			}
		}
		out[k] = e
	}
	return out
}

var secretKeyWords = []string{"password", "passwd", "passphrase", "secret", "token", "credential", "cookie",
	"session", "auth", "bearer", "signature", "apikey", "accesskey", "privatekey"}

func secretKey(k string) bool {
	k = strings.ToLower(k)
	k = strings.NewReplacer("-", "", "_", "", ".", "").Replace(k)
	if k == "pwd" || k == "pin" || strings.HasSuffix(k, "key") {
		return true
	}
	for _, w := range secretKeyWords {
		if strings.Contains(k, w) {
			return true
		}
	}
	return false
}

var secretPrefixes = []string{"ghp_", "gho_", "ghu_", "ghs_", "ghr_", "github_pat_", "glpat-", "sk-", "sk_", "rk_",
	"xoxa-", "xoxb-", "xoxp-", "xoxr-", "xoxs-", "AKIA", "ASIA", "AIza", "ya29.", "npm_", "pypi-", "hf_", "SG.",
	"shpat_", "shpss_", "shpca_", "xapp-"}

// secretValue says the whole of s is a secret. A string holding spaces is
// one only when it is a PEM block or an authentication scheme and its
// credential; redactInString finds secrets inside other strings.
func secretValue(s string) bool {
	t := strings.TrimSpace(s)
	if strings.HasPrefix(t, "-----BEGIN") {
		return true
	}
	if scheme, cred, ok := strings.Cut(t, " "); ok {
		switch strings.ToLower(scheme) {
		case "bearer", "basic":
			return !strings.ContainsAny(cred, " \t\n") && len(cred) >= 8 && credentialLike(cred)
		}
		return false
	}
	for _, p := range secretPrefixes {
		if strings.HasPrefix(t, p) && len(t) > len(p)+7 {
			return true
		}
	}
	if strings.HasPrefix(t, "eyJ") && strings.Count(t, ".") == 2 {
		return true
	}
	if i := strings.Index(t, "://"); i > 0 {
		rest := t[i+3:]
		if at := strings.IndexByte(rest, '@'); at > 0 && strings.Contains(rest[:at], ":") && !strings.ContainsAny(rest[:at], "/ ") {
			return true
		}
		return false
	}
	return highEntropy(t)
}

func highEntropy(s string) bool {
	if len(s) < 24 || s[0] == '/' {
		return false
	}
	var letter, digit bool
	var counts [128]int
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z':
			letter = true
		case c >= '0' && c <= '9':
			digit = true
		case strings.IndexByte("+/=_-.", c) >= 0:
		default:
			return false
		}
		counts[c]++
	}
	if !letter || !digit {
		return false
	}
	h := 0.0
	for _, c := range counts {
		if c > 0 {
			p := float64(c) / float64(len(s))
			h -= p * math.Log2(p)
		}
	}
	return h >= 4.0
}
