package mcp

import (
	"regexp"
	"strings"
)

// Secrets inside longer strings. Each expression's first group (or the
// whole match when it has none) is what redactInString replaces.
var (
	// tokenFormats are the known token formats, anywhere in a string.
	tokenFormats = regexp.MustCompile(`\b(?:gh[pousr]_[A-Za-z0-9]{20,}|github_pat_[A-Za-z0-9_]{20,}|glpat-[A-Za-z0-9_-]{20,}` +
		`|sk-(?:ant-|proj-)?[A-Za-z0-9_-]{20,}|[sr]k_(?:live|test)_[A-Za-z0-9]{16,}|xox[abeprs]-[A-Za-z0-9-]{10,}|xapp-[A-Za-z0-9-]{10,}` +
		`|A(?:KIA|SIA)[A-Z0-9]{16}|AIza[0-9A-Za-z_-]{30,}|ya29\.[0-9A-Za-z_-]{20,}|npm_[A-Za-z0-9]{30,}|pypi-[A-Za-z0-9_-]{30,}` +
		`|hf_[A-Za-z0-9]{30,}|SG\.[A-Za-z0-9_-]{16,}\.[A-Za-z0-9_-]{16,}|shp(?:at|ss|ca)_[a-fA-F0-9]{32}` +
		`|eyJ[A-Za-z0-9_-]{8,}\.eyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]*)`)
	// privateKeyBlock is a PEM private key, to its END line or the end.
	privateKeyBlock = regexp.MustCompile(`-----BEGIN [A-Z0-9 ]*PRIVATE KEY-----(?s:.*?)(?:-----END [A-Z0-9 ]*PRIVATE KEY-----|$)`)
	// authScheme is the credential after an HTTP authentication scheme.
	authScheme = regexp.MustCompile(`(?i)\b(?:bearer|basic|token|digest)\s+([A-Za-z0-9._~+/=:-]{8,})`)
	// authHeader is the value of an authentication header.
	authHeader = regexp.MustCompile(`(?i)\b(?:proxy-)?(?:authorization|x-api-key|api-key|x-auth-token)["']?\s*[:=]\s*(?:(?:bearer|basic|token|digest)\s+)?([^\s"']+)`)
	// assignment is NAME=VALUE, --name=VALUE, name: VALUE or a URL's
	// name=value; the name is judged by assignmentSecret.
	assignment = regexp.MustCompile(`(?:^|[\s&?;,"'{(])-{0,2}([A-Za-z_][A-Za-z0-9_.-]*)["']?(=|:[ \t]*)("[^"]*"|'[^']*'|[^\s&;,"'<>()\[\]{}/][^\s&;,"'<>()\[\]{}]*)`)
	// option is "--name VALUE" on a command line.
	option = regexp.MustCompile(`(?:^|\s)--?([A-Za-z][A-Za-z0-9_-]*)[ \t]+("[^"]*"|'[^']*'|[^\s"'-][^\s"']*)`)
	// urlUserinfo is a URL's user and password.
	urlUserinfo = regexp.MustCompile(`\b[A-Za-z][A-Za-z0-9+.-]*://([^\s/?#@"'<>\[\]]+)@`)
)

// strongSecretWords are names that say secret even in prose ("password:
// x"); secretKey's wider list (auth, session, any *key) is taken only in
// NAME=VALUE form.
var strongSecretWords = []string{"password", "passwd", "passphrase", "secret", "token", "credential", "apikey", "accesskey", "privatekey"}

func strongSecretName(k string) bool {
	k = strings.NewReplacer("-", "", "_", "", ".", "").Replace(strings.ToLower(k))
	if strings.HasSuffix(k, "pass") || strings.HasSuffix(k, "pwd") {
		return true
	}
	for _, w := range strongSecretWords {
		if strings.Contains(k, w) {
			return true
		}
	}
	return false
}

// credentialLike says v could be a credential rather than a word: it
// holds a digit or a symbol, or is long.
func credentialLike(v string) bool {
	return len(v) >= 20 || strings.ContainsAny(v, "0123456789+/=._~:-")
}

// redactInString replaces the secret parts of s (see redact) and counts
// them in n; what is not secret stays as it was.
func redactInString(s string, n *int) string {
	if len(s) < 8 {
		return s
	}
	s = replaceGroup(s, privateKeyBlock, 0, nil, n)
	s = replaceGroup(s, tokenFormats, 0, nil, n)
	s = replaceGroup(s, urlUserinfo, 1, nil, n)
	s = replaceGroup(s, authHeader, 1, nil, n)
	s = replaceGroup(s, authScheme, 1, func(m []string) bool { return credentialLike(m[1]) }, n)
	s = replaceGroup(s, assignment, 3, func(m []string) bool {
		v := strings.Trim(m[3], `"'`)
		if v == "" {
			return false
		}
		if m[2] == "=" {
			return secretKey(m[1]) || secretValue(v)
		}
		return strongSecretName(m[1])
	}, n)
	s = replaceGroup(s, option, 2, func(m []string) bool { return strongSecretName(m[1]) }, n)
	return s
}

// replaceGroup replaces group g of every match of re for which keep (nil:
// always) says so, unless it is redacted already.
func replaceGroup(s string, re *regexp.Regexp, g int, judge func(m []string) bool, n *int) string {
	idx := re.FindAllStringSubmatchIndex(s, -1)
	if idx == nil {
		return s
	}
	var b strings.Builder
	last := 0
	for _, loc := range idx {
		start, end := loc[2*g], loc[2*g+1]
		if start < 0 || s[start:end] == redacted {
			continue
		}
		if judge != nil {
			m := make([]string, len(loc)/2)
			for i := range m {
				if loc[2*i] >= 0 {
					m[i] = s[loc[2*i]:loc[2*i+1]]
				}
			}
			if !judge(m) {
				continue
			}
		}
		b.WriteString(s[last:start])
		b.WriteString(redacted)
		last = end
		*n++
	}
	b.WriteString(s[last:])
	return b.String()
}

// auditURI is a URI as the audit records it, whatever --audit-args says:
// its user and password, and the value of every query and fragment
// parameter, replaced by "[redacted]", and any token of a known format
// elsewhere in it too. Names stay, so the record still says what was
// read.
func auditURI(uri string) string {
	if uri == "" {
		return ""
	}
	n := 0
	s, frag, hasFrag := strings.Cut(oddPort(replaceGroup(uri, urlUserinfo, 1, nil, &n)), "#")
	if before, query, ok := strings.Cut(s, "?"); ok {
		s = before + "?" + redactParams(query)
	}
	if hasFrag {
		s += "#" + redactParams(frag)
	}
	return redactInString(s, &n)
}

// oddPort redacts what follows ':' in an authority without '@' when it is
// not a port number: "scheme://user:password/" without its '@'.
func oddPort(uri string) string {
	_, rest, ok := strings.Cut(uri, "://")
	if !ok {
		return uri
	}
	start := len(uri) - len(rest)
	end := strings.IndexAny(rest, "/?#")
	if end < 0 {
		end = len(rest)
	}
	colon := strings.LastIndexByte(rest[:end], ':')
	if colon < 0 || strings.IndexByte(rest[:end], '@') >= 0 || allIn(rest[colon+1:end], "0123456789") {
		return uri
	}
	return uri[:start+colon+1] + redacted + uri[start+end:]
}

// redactParams redacts the values of a&b=c style parameters; a parameter
// without '=' is kept unless it looks like a secret.
func redactParams(q string) string {
	parts := strings.Split(q, "&")
	for i, p := range parts {
		name, value, has := strings.Cut(p, "=")
		switch {
		case has && value != "":
			parts[i] = name + "=" + redacted
		case !has && secretValue(p):
			parts[i] = redacted
		}
	}
	return strings.Join(parts, "&")
}
