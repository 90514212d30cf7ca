package landlock

import (
	"testing"

	"github.com/sandbox-run/sandbox-run/policy"
)

// TestParseReadback: only a line with every part in force is ok.
func TestParseReadback(t *testing.T) {
	for _, tc := range []struct {
		line     string
		nnp, sc  int
		root, ok bool
	}{
		{"nnp=1 seccomp=2 root=denied", 1, 2, true, true},
		{"nnp=0 seccomp=2 root=denied", 0, 2, true, false},
		{"nnp=1 seccomp=0 root=denied", 1, 0, true, false},
		{"nnp=1 seccomp=2 root=open", 1, 2, false, false},
		{"", -1, -1, false, false},
		{"garbage", -1, -1, false, false},
	} {
		nnp, sc, root, ok := parseReadback(tc.line)
		if nnp != tc.nnp || sc != tc.sc || root != tc.root || ok != tc.ok {
			t.Errorf("%q: %d %d %v %v, want %d %d %v %v", tc.line, nnp, sc, root, ok, tc.nnp, tc.sc, tc.root, tc.ok)
		}
	}
}

// TestParseStatus reads the fields the orphan search decides by.
func TestParseStatus(t *testing.T) {
	st := parseStatus("Name:\tsleep\nPPid:\t42\nUid:\t65534\t65534\t65534\t65534\nNoNewPrivs:\t1\nSeccomp:\t2\n")
	if st != (procStatus{ppid: 42, uid: 65534, nnp: true, seccomp: true}) {
		t.Errorf("got %+v", st)
	}
	st = parseStatus("PPid:\t1\nUid:\t0\t0\t0\t0\nNoNewPrivs:\t0\nSeccomp:\t0\n")
	if st != (procStatus{ppid: 1, uid: 0}) {
		t.Errorf("got %+v", st)
	}
}

// TestWithTmpdir: the run's TMPDIR replaces the default, never the
// policy's own.
func TestWithTmpdir(t *testing.T) {
	env := withTmpdir([]string{"A=1", "HOME=/tmp", "TMPDIR=/tmp"}, policy.Policy{}, "/run/x")
	if env[1] != "HOME=/run/x" || env[2] != "TMPDIR=/run/x" {
		t.Errorf("default: %v", env)
	}
	env = withTmpdir([]string{"HOME=/h"}, policy.Policy{Home: "/h"}, "/run/x")
	if env[0] != "HOME=/h" {
		t.Errorf("--home: %v", env)
	}
	env = withTmpdir([]string{"TMPDIR=/mine"}, policy.Policy{Env: map[string]string{"TMPDIR": "/mine"}}, "/run/x")
	if env[0] != "TMPDIR=/mine" {
		t.Errorf("policy's own: %v", env)
	}
}
