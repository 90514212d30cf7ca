package policy

import (
	"errors"
	"strings"
	"testing"
	"time"
)

func TestValidate(t *testing.T) {
	ok := Policy{Workdir: "/w"}
	tests := []struct {
		name  string
		p     Policy
		field string // "" = valid
	}{
		{"minimal", ok, ""},
		{"no workdir", Policy{}, "workdir"},
		{"relative workdir", Policy{Workdir: "w"}, "workdir"},
		{"root writable", Policy{Workdir: "/"}, "write"},
		{"etc writable", Policy{Workdir: "/w", Write: []string{"/etc"}}, "write"},
		{"relative read", Policy{Workdir: "/w", Read: []string{"x"}}, "read"},
		{"NUL in read", Policy{Workdir: "/w", Read: []string{"/a\x00b"}}, "read"},
		{"NUL in env value", Policy{Workdir: "/w", Env: map[string]string{"K": "a\x00b"}}, "env K"},
		{"= in env name", Policy{Workdir: "/w", Env: map[string]string{"A=B": "c"}}, "env"},
		{"empty env name", Policy{Workdir: "/w", Env: map[string]string{"": "c"}}, "env"},
		{"bad mode", Policy{Workdir: "/w", Sandbox: "docker"}, "sandbox"},
		{"protect escapes", Policy{Workdir: "/w", Protect: []string{"../x"}}, "protect"},
		{"empty allow", Policy{Workdir: "/w", AllowHosts: []string{" "}}, "allow-host"},
		{"negative timeout", Policy{Workdir: "/w", Timeout: Duration(-time.Second)}, "timeout"},
		{"relative socket", Policy{Workdir: "/w", LLMSocket: "s.sock"}, "llm-socket"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.p.Validate()
			if tt.field == "" {
				if err != nil {
					t.Fatalf("Validate() = %v, want nil", err)
				}
				return
			}
			var ie *InvalidError
			if !errors.As(err, &ie) || !errors.Is(err, ErrInvalid) {
				t.Fatalf("Validate() = %v, want *InvalidError", err)
			}
			if ie.Field != tt.field {
				t.Errorf("field = %q, want %q (%v)", ie.Field, tt.field, err)
			}
			if ie.Fix == "" {
				t.Errorf("error without a fix: %v", err)
			}
		})
	}
}

func TestParseProfile(t *testing.T) {
	p, err := Parse(strings.NewReader(`{"workdir":"/w","write":["/o"],"env":{"A":"1"},"timeout":"90s","allow_hosts":["example.com"]}`))
	if err != nil {
		t.Fatal(err)
	}
	if p.Workdir != "/w" || len(p.Write) != 1 || p.Env["A"] != "1" || time.Duration(p.Timeout) != 90*time.Second || p.AllowHosts[0] != "example.com" {
		t.Errorf("Parse = %+v", p)
	}
	for _, bad := range []string{`{"workdri":"/w"}`, `{"timeout":5}`, `{} {}`, `[`} {
		if _, err := Parse(strings.NewReader(bad)); err == nil {
			t.Errorf("Parse(%s) accepted", bad)
		}
	}
}

func FuzzParse(f *testing.F) {
	f.Add([]byte(`{"workdir":"/w","env":{"A":"1"}}`))
	f.Add([]byte(`{"timeout":"1s","read":["/a"]}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		p, err := Parse(strings.NewReader(string(b)))
		if err != nil {
			return
		}
		// A parsed profile either validates or says why, never panics.
		if verr := p.Validate(); verr != nil && !errors.Is(verr, ErrInvalid) {
			t.Fatalf("Validate error not ErrInvalid: %v", verr)
		}
	})
}

func TestEnviron(t *testing.T) {
	p := Policy{Workdir: "/w", Env: map[string]string{"A": "1", "PATH": "/bin"}, PassEnv: []string{"TERM", "MISSING"}}
	host := map[string]string{"TERM": "xterm", "SECRET": "x"}
	env, err := p.Environ(func(k string) (string, bool) { v, ok := host[k]; return v, ok })
	if err != nil {
		t.Fatal(err)
	}
	got := strings.Join(env, " ")
	want := "A=1 HOME=/w LANG=C.UTF-8 PATH=/bin TERM=xterm TMPDIR=/tmp"
	if got != want {
		t.Errorf("Environ = %q, want %q", got, want)
	}
	if _, err := (Policy{Workdir: "/w", PassEnv: []string{"X"}}).Environ(func(string) (string, bool) { return "a\x00b", true }); err == nil {
		t.Error("a NUL in a passed value was accepted")
	}
}

func TestParseSize(t *testing.T) {
	for in, want := range map[string]int64{"512": 512, "64K": 64 << 10, "256M": 256 << 20, "2G": 2 << 30, "1GiB": 1 << 30, "10mb": 10 << 20} {
		got, err := ParseSize(in)
		if err != nil || got != want {
			t.Errorf("ParseSize(%q) = %d, %v; want %d", in, got, err, want)
		}
	}
	for _, bad := range []string{"", "x", "-1", "1.5G", "99999999999T"} {
		if _, err := ParseSize(bad); err == nil {
			t.Errorf("ParseSize(%q) accepted", bad)
		}
	}
}

func TestProtectedPaths(t *testing.T) {
	p := Policy{Workdir: "/w", Write: []string{"/o"}, Protect: []string{".envrc", "/w/secret"}}
	got := p.ProtectedPaths()
	has := func(s string) bool {
		for _, g := range got {
			if g == s {
				return true
			}
		}
		return false
	}
	for _, want := range []string{"/w/.git/hooks", "/o/.git/config", "/w/.envrc", "/o/.envrc", "/w/secret", "/o/.claude"} {
		if !has(want) {
			t.Errorf("ProtectedPaths lacks %s: %v", want, got)
		}
	}
}
