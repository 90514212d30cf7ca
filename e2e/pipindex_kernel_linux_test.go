package e2e

import (
	"archive/zip"
	"bytes"
	"crypto/sha256"
	"encoding/base64"
	"fmt"
	"net/http"
	"testing"
)

// The wheel the test's package index serves: its __init__.py holds
// wheelMark, which a successful install makes readable inside.
const (
	wheelName = "sbxwheel"
	wheelFile = wheelName + "-1.0-py3-none-any.whl"
	wheelMark = "sbxwheel-installed-from-the-test-index"
)

// buildWheel writes the smallest wheel pip installs: the package, and a
// dist-info with METADATA, WHEEL and a RECORD of the others' hashes.
func buildWheel(t *testing.T) []byte {
	t.Helper()
	info := wheelName + "-1.0.dist-info/"
	files := []struct{ name, body string }{
		{wheelName + "/__init__.py", fmt.Sprintf("MARK = %q\n", wheelMark)},
		{info + "METADATA", "Metadata-Version: 2.1\nName: " + wheelName + "\nVersion: 1.0\n"},
		{info + "WHEEL", "Wheel-Version: 1.0\nGenerator: sandbox-run-e2e\nRoot-Is-Purelib: true\nTag: py3-none-any\n"},
	}
	var buf bytes.Buffer
	z := zip.NewWriter(&buf)
	var record bytes.Buffer
	for _, f := range files {
		sum := sha256.Sum256([]byte(f.body))
		fmt.Fprintf(&record, "%s,sha256=%s,%d\n", f.name, base64.RawURLEncoding.EncodeToString(sum[:]), len(f.body))
		w, err := z.Create(f.name)
		if err != nil {
			t.Fatal(err)
		}
		w.Write([]byte(f.body))
	}
	record.WriteString(info + "RECORD,,\n")
	w, err := z.Create(info + "RECORD")
	if err != nil {
		t.Fatal(err)
	}
	w.Write(record.Bytes())
	if err := z.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// simpleIndex is a PEP 503 index of one project, wheelName, with one
// wheel, for paths under /simple/.
func simpleIndex(t *testing.T) http.Handler {
	whl := buildWheel(t)
	sum := sha256.Sum256(whl)
	page := fmt.Sprintf("<!DOCTYPE html><html><body><a href=\"/simple/%s/%s#sha256=%x\">%s</a></body></html>\n", wheelName, wheelFile, sum, wheelFile)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/simple/" + wheelName + "/":
			w.Header().Set("Content-Type", "text/html")
			fmt.Fprint(w, page)
		case "/simple/" + wheelName + "/" + wheelFile:
			w.Header().Set("Content-Type", "application/octet-stream")
			w.Write(whl)
		default:
			http.NotFound(w, r)
		}
	})
}
