package filter

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestCheckPtrace(t *testing.T) {
	noYama := errors.Join(ErrNoYama, fs.ErrNotExist)
	unreadable := fs.ErrPermission
	for _, tc := range []struct {
		name     string
		scope    int
		err      error
		ok       bool
		mentions []string // what the message must say: what, why, fix
		wraps    error
	}{
		{"scope 0", 0, nil, false, []string{"--ptrace refused", "ptrace_scope is 0", "sysctl -w kernel.yama.ptrace_scope=1", "without --ptrace"}, nil},
		{"scope -1", -1, nil, false, []string{"ptrace_scope is -1", "sysctl -w kernel.yama.ptrace_scope=1"}, nil},
		{"scope 1", 1, nil, true, nil, nil},
		{"scope 2", 2, nil, true, nil, nil},
		{"scope 3", 3, nil, true, nil, nil},
		{"no Yama", 0, noYama, false, []string{"--ptrace refused", "no Yama", yamaPtraceScopePath, "CONFIG_SECURITY_YAMA", "ptrace_scope=1", "without --ptrace"}, ErrNoYama},
		{"no Yama whatever the scope", 1, noYama, false, []string{"no Yama"}, ErrNoYama},
		{"unreadable", 2, unreadable, false, []string{"cannot be read", "readable", "without --ptrace"}, fs.ErrPermission},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := CheckPtrace(tc.scope, tc.err)
			if tc.ok {
				if err != nil {
					t.Fatalf("refused: %v", err)
				}
				return
			}
			if !errors.Is(err, ErrPtraceRefused) {
				t.Fatalf("err = %v, want ErrPtraceRefused", err)
			}
			if tc.wraps != nil && !errors.Is(err, tc.wraps) {
				t.Errorf("err = %v, want it to wrap %v", err, tc.wraps)
			}
			for _, m := range tc.mentions {
				if !strings.Contains(err.Error(), m) {
					t.Errorf("message lacks %q: %v", m, err)
				}
			}
		})
	}
}

func TestReadPtraceScope(t *testing.T) {
	dir := t.TempDir()
	write := func(name, s string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(s), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	for _, tc := range []struct {
		name     string
		path     string
		want     int
		wantErr  error
		notNoYam bool
	}{
		{"one", write("one", "1\n"), 1, nil, false},
		{"zero", write("zero", "0\n"), 0, nil, false},
		{"three", write("three", "3"), 3, nil, false},
		{"absent", filepath.Join(dir, "absent"), 0, ErrNoYama, false},
		{"garbage", write("garbage", "yes\n"), 0, nil, true},
		{"directory", dir, 0, nil, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := readPtraceScope(tc.path)
			switch {
			case tc.notNoYam:
				if err == nil || errors.Is(err, ErrNoYama) {
					t.Fatalf("err = %v, want an error that is not ErrNoYama", err)
				}
			case !errors.Is(err, tc.wantErr):
				t.Fatalf("err = %v, want %v", err, tc.wantErr)
			case got != tc.want:
				t.Errorf("scope = %d, want %d", got, tc.want)
			}
			if tc.wantErr != nil && err == tc.wantErr {
				t.Error("bare sentinel, want context")
			}
		})
	}
}

// TestYamaPtraceScopeHere checks the real sysctl against a stat of the same
// file. On a kernel without Yama (this project's CI machine) the result must
// wrap ErrNoYama and CheckPtrace must refuse.
func TestYamaPtraceScopeHere(t *testing.T) {
	_, statErr := os.Stat(yamaPtraceScopePath)
	scope, err := YamaPtraceScope()
	switch {
	case errors.Is(statErr, fs.ErrNotExist):
		if !errors.Is(err, ErrNoYama) {
			t.Fatalf("no %s, but YamaPtraceScope = %d, %v", yamaPtraceScopePath, scope, err)
		}
		if CheckPtrace(scope, err) == nil {
			t.Fatal("CheckPtrace accepted a kernel without Yama")
		}
	case statErr == nil:
		if err != nil {
			t.Fatalf("YamaPtraceScope: %v", err)
		}
		if got := CheckPtrace(scope, err) == nil; got != (scope >= 1) {
			t.Fatalf("scope %d: CheckPtrace ok = %v", scope, got)
		}
	}
}
