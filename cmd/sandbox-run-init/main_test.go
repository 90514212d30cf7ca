package main

import (
	"os/exec"
	"strings"
	"testing"
)

// heavy are packages sandbox-run links that init has no use for; any of
// them in sandbox-run-init would bring back the start-up cost the binary
// exists to avoid (their initialisers and pages).
var heavy = []string{"net/http", "crypto/tls", "crypto/x509", "github.com/sandbox-run/sandbox-run/sandbox", "github.com/sandbox-run/sandbox-run/proxy"}

// TestLinksOnlyInit: sandbox-run-init links none of heavy. Control: the
// same check finds them in sandbox-run.
func TestLinksOnlyInit(t *testing.T) {
	deps := func(pkg string) map[string]bool {
		out, err := exec.Command("go", "list", "-deps", pkg).Output()
		if err != nil {
			t.Fatalf("go list -deps %s: %v", pkg, err)
		}
		m := map[string]bool{}
		for _, p := range strings.Fields(string(out)) {
			m[p] = true
		}
		return m
	}
	const mod = "github.com/sandbox-run/sandbox-run/"
	full := deps(mod + "cmd/sandbox-run")
	for _, h := range heavy {
		if !full[h] {
			t.Fatalf("untested: sandbox-run does not link %s either", h)
		}
	}
	init := deps(mod + "cmd/sandbox-run-init")
	if !init[mod+"internal/initproc"] {
		t.Fatal("sandbox-run-init does not link internal/initproc")
	}
	for _, h := range heavy {
		if init[h] {
			t.Errorf("sandbox-run-init links %s", h)
		}
	}
}
