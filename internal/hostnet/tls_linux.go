package hostnet

import (
	"bytes"
	"crypto/x509"
	"os"
	"path/filepath"
	"strconv"

	"github.com/sandbox-run/sandbox-run/internal/fault"
	"github.com/sandbox-run/sandbox-run/internal/plan"
	"github.com/sandbox-run/sandbox-run/policy"
	"github.com/sandbox-run/sandbox-run/proxy"
	"github.com/sandbox-run/sandbox-run/report"
)

// caInside is where the run's CA bundle (the system roots plus the run's
// CA) appears inside; every CA variable points at it.
const caInside = "/run/sandbox-run/ca-bundle.pem"

// systemBundles are the paths where distributions keep the system's CA
// bundle (Debian/Ubuntu, Alpine, Red Hat/Fedora twice). Each that exists
// on the host is covered, read-only, by the run's bundle inside; the first
// that exists is the system roots the bundle starts with.
var systemBundles = []string{
	"/etc/ssl/certs/ca-certificates.crt",
	"/etc/ssl/cert.pem",
	"/etc/pki/tls/certs/ca-bundle.crt",
	"/etc/pki/ca-trust/extracted/pem/tls-ca-bundle.pem",
}

// caEnv are the variables tools read a CA bundle from without flags:
// OpenSSL (Python's ssl, curl built on it, Go's crypto/x509 on Linux),
// requests, Node, curl, git, pip and npm.
var caEnv = []string{"SSL_CERT_FILE", "REQUESTS_CA_BUNDLE", "NODE_EXTRA_CA_CERTS", "CURL_CA_BUNDLE",
	"GIT_SSL_CAINFO", "PIP_CERT", "npm_config_cafile"}

// upstreamRoots reads --upstream-ca: nil (the system roots) when it is not
// set. The file is read once, before the command starts, and must not lie
// in one of the run's writable directories (invariant 10).
func upstreamRoots(p policy.Policy) (*x509.CertPool, error) {
	if p.UpstreamCA == "" {
		return nil, nil
	}
	w := p.Writable()
	if policy.InsideAny(p.UpstreamCA, w) || policy.InsideAny(plan.Resolved(p.UpstreamCA), plan.ResolvedAll(w)) {
		return nil, fault.New("--upstream-ca "+p.UpstreamCA, "lies in a writable directory of the run, where the command could change it",
			"keep the CA file outside every --workdir and --write dir")
	}
	b, err := os.ReadFile(p.UpstreamCA)
	if err != nil {
		return nil, fault.New("--upstream-ca "+p.UpstreamCA, fault.Reason(err), "name a readable PEM file of CA certificates")
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(b) {
		return nil, fault.New("--upstream-ca "+p.UpstreamCA, "holds no PEM certificate", "name a PEM file of CA certificates")
	}
	return pool, nil
}

// trustRunCA writes the run's CA bundle (the host's system bundle, then
// the run CA's certificate) into the run's runtime directory, binds it at
// caInside and over every system bundle path the host has, and points the
// CA variables at it. Only the certificate is written: the CA's key stays
// in the proxy. It returns the system bundle paths it covered.
func (n *Network) trustRunCA(px *proxy.Proxy, uid, gid int, root bool) ([]string, error) {
	ca := px.CACertificatePEM()
	if ca == nil {
		return nil, nil
	}
	var bundle bytes.Buffer
	var covered []string
	for _, p := range systemBundles {
		real, err := filepath.EvalSymlinks(p)
		if err != nil {
			continue
		}
		if fi, err := os.Stat(real); err != nil || !fi.Mode().IsRegular() {
			continue
		}
		if bundle.Len() == 0 {
			b, err := os.ReadFile(real)
			if err != nil {
				return nil, fault.New("cannot read the system CA bundle "+real, fault.Reason(err), "check its permissions")
			}
			bundle.Write(b)
			bundle.WriteString("\n")
		}
		if !contains(covered, real) {
			covered = append(covered, real)
		}
	}
	bundle.WriteString("# sandbox-run per-run CA: signs the hosts the egress proxy terminates (--allow-http)\n")
	bundle.Write(ca)
	path := filepath.Join(n.Dir, "ca-bundle.pem")
	if err := os.WriteFile(path, bundle.Bytes(), 0o644); err != nil {
		return nil, fault.New("cannot write the run's CA bundle "+path, fault.Reason(err), "check that $TMPDIR is writable")
	}
	if root {
		if err := os.Chown(path, uid, gid); err != nil {
			return nil, fault.New("cannot hand the CA bundle to uid "+strconv.Itoa(uid), fault.Reason(err), "check $TMPDIR")
		}
	}
	n.Binds = append(n.Binds, [2]string{path, caInside})
	for _, c := range covered {
		n.Binds = append(n.Binds, [2]string{path, c})
	}
	for _, k := range caEnv {
		n.Env[k] = caInside
	}
	return covered, nil
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// TLSReport is the report's TLS section: nil when the run's proxy
// terminates nothing.
func (n *Network) TLSReport(p policy.Policy) *report.TLSReport {
	if n == nil || n.Proxy == nil || n.Proxy.CACertificatePEM() == nil {
		return nil
	}
	roots := "system"
	if p.UpstreamCA != "" {
		roots = p.UpstreamCA
	}
	return &report.TLSReport{Terminated: n.Proxy.TerminatedHosts(), Rules: n.Proxy.HTTPRules(), UpstreamRoots: roots,
		CABundle: caInside, CAEnv: append([]string(nil), caEnv...), Covered: n.caCovered}
}
