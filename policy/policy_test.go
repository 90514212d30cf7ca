package policy

import (
	"bytes"
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/sandbox-run/sandbox-run/internal/limits"
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
		{"gvisor mode", Policy{Workdir: "/w", Sandbox: ModeGvisor}, ""},
		{"protect escapes", Policy{Workdir: "/w", Protect: []string{"../x"}}, "protect"},
		{"empty allow", Policy{Workdir: "/w", AllowHosts: []string{" "}}, "allow-host"},
		{"negative timeout", Policy{Workdir: "/w", Timeout: Duration(-time.Second)}, "timeout"},
		{"relative socket", Policy{Workdir: "/w", LLMSocket: "s.sock"}, "llm-socket"},
		{"negative tmp size", Policy{Workdir: "/w", TmpSize: -1}, "tmp-size"},
		{"negative shm size", Policy{Workdir: "/w", ShmSize: -1}, "shm-size"},
		// The allow-list's syntax and address classes (allowlist.Parse).
		{"allow-host with a space", Policy{Workdir: "/w", AllowHosts: []string{"exa mple.com"}}, "allow-host"},
		{"allow-host bare star", Policy{Workdir: "/w", AllowHosts: []string{"*"}}, "allow-host"},
		{"allow-host loopback", Policy{Workdir: "/w", AllowHosts: []string{"localhost:8080"}}, "allow-host"},
		{"allow-host metadata CIDR", Policy{Workdir: "/w", AllowHosts: []string{"169.254.0.0/16"}}, "allow-host"},
		{"allow-host second entry bad", Policy{Workdir: "/w", AllowHosts: []string{"example.com", "http://x.example"}}, "allow-host"},
		{"allow-host valid", Policy{Workdir: "/w", AllowHosts: []string{"example.com", "*.example.org:*", "10.0.0.0/8", "[fd00::1]:8443"}}, ""},
		// The limits' minimums.
		{"memory below minimum", Policy{Workdir: "/w", Memory: 512 << 10}, "memory"},
		{"memory at minimum", Policy{Workdir: "/w", Memory: MinMemory}, ""},
		{"nofile below minimum", Policy{Workdir: "/w", NoFile: MinNoFile - 1}, "nofile"},
		{"nofile at minimum", Policy{Workdir: "/w", NoFile: MinNoFile}, ""},
		// Where protected paths may lie.
		{"absolute protect outside", Policy{Workdir: "/w", Protect: []string{"/etc/passwd"}}, "protect"},
		{"absolute protect beside the workdir", Policy{Workdir: "/w", Protect: []string{"/wx/.envrc"}}, "protect"},
		{"absolute protect in the workdir", Policy{Workdir: "/w", Protect: []string{"/w/.envrc"}}, ""},
		{"absolute protect in a write dir", Policy{Workdir: "/w", Write: []string{"/o"}, Protect: []string{"/o/x"}}, ""},
		{"absolute protect in the home", Policy{Workdir: "/w", Home: "/h", Protect: []string{"/h/.bashrc"}}, ""},
		// A bad value is refused as such in every mode, before what the
		// mode cannot mean (tier 0 keeps no cache).
		{"unknown cache in tier 0", Policy{Workdir: "/w", Sandbox: ModeOff, Caches: []string{"maven"}}, "cache"},
		{"known cache in tier 0", Policy{Workdir: "/w", Sandbox: ModeOff, Caches: []string{"go"}}, "session"},
		{"absolute protect with a session", Policy{Workdir: "/w", Session: "s", Protect: []string{"/elsewhere/x"}}, ""},
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

// TestMinimumsAgreeWithLimits: the minimums Validate holds are the limits
// package's own, so that no policy Validate accepts is refused by limits
// at set-up, and none is refused here that limits would hold.
func TestMinimumsAgreeWithLimits(t *testing.T) {
	for _, c := range []struct {
		name string
		l    limits.Limits
		p    Policy
		ok   bool
	}{
		{"memory below", limits.Limits{Memory: MinMemory - 1}, Policy{Workdir: "/w", Memory: MinMemory - 1}, false},
		{"memory at", limits.Limits{Memory: MinMemory}, Policy{Workdir: "/w", Memory: MinMemory}, true},
		{"nofile below", limits.Limits{NoFile: MinNoFile - 1}, Policy{Workdir: "/w", NoFile: MinNoFile - 1}, false},
		{"nofile at", limits.Limits{NoFile: MinNoFile}, Policy{Workdir: "/w", NoFile: MinNoFile}, true},
	} {
		lerr, perr := c.l.Validate(), c.p.Validate()
		if (lerr == nil) != c.ok || (perr == nil) != c.ok {
			t.Errorf("%s: limits says %v, policy says %v; want both ok=%v", c.name, lerr, perr, c.ok)
		}
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
	for bad, want := range map[string]string{
		`{"workdri":"/w"}`:                      `unknown field "workdri"`,
		`{"timeout":5}`:                         "duration",
		`{} {}`:                                 "trailing",
		`{}x`:                                   "trailing",
		`[`:                                     "not a JSON object",
		`"x"`:                                   "not a JSON object",
		`{"read":["/a"],"read":["/b"]}`:         `"read" given twice`,
		`{"env":{"A":"1"},"write":[],"env":{}}`: `"env" given twice`,
		`{"memory":"1GB"}`:                      `"memory": size "1GB": GB is ambiguous`,
		`{"tmp_size":"lots"}`:                   `"tmp_size": size "lots"`,
		`{"fsize":true}`:                        `"fsize": a JSON bool where a number is expected`,
		`{"cpu_time":"5"}`:                      `duration "5"`,
		`{"pids":"64"}`:                         `"pids": a JSON string where a number is expected`,
		`{"read":"/a"}`:                         `"read": a JSON string where a list is expected`,
		`{"env":"` + strings.Repeat("a", MaxProfileSize) + `"}`: "larger than",
	} {
		_, err := Parse(strings.NewReader(bad))
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("Parse(%.40s) = %v; want an error holding %q", bad, err, want)
		}
	}
	// Duplicates deeper than the top level are encoding/json's business:
	// only the profile's own fields are checked.
	if _, err := Parse(strings.NewReader(`{"env":{"A":"1"}}`)); err != nil {
		t.Errorf("a valid profile refused: %v", err)
	}
}

func TestCheckPath(t *testing.T) {
	for _, tt := range []struct {
		p, want string // want "" = accepted
	}{
		{"/usr/share", ""},
		{"rel/dir", ""},
		{"/a/..b/c", ""},
		{"", "empty"},
		{"/a\x00b", "NUL"},
		{"/a\nb", "control character"},
		{"/a\tb", "control character"},
		{"/a\x7fb", "control character"},
		{"/a/../b", "'..'"},
		{"..", "'..'"},
		{"/a/..", "'..'"},
	} {
		p := tt.p
		err := CheckPath("read", p)
		switch {
		case tt.want == "" && err != nil:
			t.Errorf("CheckPath(%q) = %v, want nil", p, err)
		case tt.want != "" && (err == nil || !strings.Contains(err.Error(), tt.want) || !errors.Is(err, ErrInvalid)):
			t.Errorf("CheckPath(%q) = %v, want an ErrInvalid holding %q", p, err, tt.want)
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
		// What was accepted is what is written back: marshalling and
		// parsing again changes nothing.
		b1, err := json.Marshal(p)
		if err != nil {
			t.Fatalf("Marshal: %v", err)
		}
		q, err := Parse(bytes.NewReader(b1))
		if err != nil {
			t.Fatalf("Parse refuses its own output %s: %v", b1, err)
		}
		if b2, _ := json.Marshal(q); !bytes.Equal(b1, b2) {
			t.Fatalf("round trip changed the profile:\n%s\n%s", b1, b2)
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
	want := "A=1 HOME=/tmp LANG=C.UTF-8 PATH=/bin TERM=xterm TMPDIR=/tmp"
	if got != want {
		t.Errorf("Environ = %q, want %q", got, want)
	}
	if _, err := (Policy{Workdir: "/w", PassEnv: []string{"X"}}).Environ(func(string) (string, bool) { return "a\x00b", true }); err == nil {
		t.Error("a NUL in a passed value was accepted")
	}
}

func TestParseSize(t *testing.T) {
	for in, want := range map[string]int64{
		"512": 512, "512B": 512, "64K": 64 << 10, "64k": 64 << 10, "64Ki": 64 << 10, "64KiB": 64 << 10,
		"256M": 256 << 20, "256MiB": 256 << 20, "256mib": 256 << 20, "2G": 2 << 30, "1GiB": 1 << 30, "1T": 1 << 40, "0": 0,
	} {
		got, err := ParseSize(in)
		if err != nil || got != want {
			t.Errorf("ParseSize(%q) = %d, %v; want %d", in, got, err, want)
		}
	}
	for bad, why := range map[string]string{
		"": "whole number", "x": "whole number", "-1": "whole number", "+1": "whole number", "1.5G": "whole number",
		" 1M": "whole number", "1 M": "unknown unit", "1M ": "unknown unit", "99999999999T": "too large",
		"512MB": "ambiguous", "10mb": "ambiguous", "1KB": "ambiguous", "2GB": "ambiguous", "1TB": "ambiguous",
		"1P": "unknown unit", "1KiBB": "unknown unit", "1IB": "unknown unit", "1iB": "unknown unit",
	} {
		if n, err := ParseSize(bad); err == nil || !strings.Contains(err.Error(), why) {
			t.Errorf("ParseSize(%q) = %d, %v; want an error saying %q", bad, n, err, why)
		}
	}
}

// TestProfileSpellings: a profile takes sizes and durations spelt as the
// flags take them, through the same parsers.
func TestProfileSpellings(t *testing.T) {
	p, err := Parse(strings.NewReader(`{"memory":"512M","fsize":"64KiB","tmp_size":"1G","timeout":"1m30s","cpu_time":"500ms"}`))
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		field, flag string
		got         int64
		parse       func(string) (int64, error)
	}{
		{"memory", "512M", p.Memory, ParseSize},
		{"fsize", "64KiB", p.FSize, ParseSize},
		{"tmp_size", "1G", p.TmpSize, ParseSize},
		{"timeout", "1m30s", int64(p.Timeout), func(s string) (int64, error) { d, err := ParseDuration(s); return int64(d), err }},
		{"cpu_time", "500ms", int64(p.CPUTime), func(s string) (int64, error) { d, err := ParseDuration(s); return int64(d), err }},
	} {
		want, err := c.parse(c.flag)
		if err != nil || c.got != want || want == 0 {
			t.Errorf("profile %s %q = %d, the flag's parser says %d (%v)", c.field, c.flag, c.got, want, err)
		}
	}
	// A number of bytes stays one.
	if p, err := Parse(strings.NewReader(`{"memory":1048576}`)); err != nil || p.Memory != 1<<20 {
		t.Errorf("memory as a number: %d, %v", p.Memory, err)
	}
}

func TestPassEnvNames(t *testing.T) {
	for _, ok := range []string{"A", "_X", "HTTP_TOKEN", "a1"} {
		if err := (Policy{Workdir: "/w", PassEnv: []string{ok}}).Validate(); err != nil {
			t.Errorf("pass-env %q refused: %v", ok, err)
		}
	}
	for _, bad := range []string{"", "1A", "A-B", "A B", "A=B", "A.B", "Ä", "A\x00"} {
		err := (Policy{Workdir: "/w", PassEnv: []string{bad}}).Validate()
		if !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), "pass-env") {
			t.Errorf("pass-env %q: %v, want refused", bad, err)
		}
	}
	p := Policy{Workdir: "/w", PassEnv: []string{"SET", "UNSET", "EMPTY"}}
	got := p.MissingPassEnv(func(k string) (string, bool) { return "", k != "UNSET" })
	if len(got) != 1 || got[0] != "UNSET" {
		t.Errorf("MissingPassEnv = %q, want [UNSET] (an empty value is set)", got)
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

func TestHostCheckWritable(t *testing.T) {
	// Own stands for the host's owner check: mine is the caller's.
	var asked []string
	own := func(dir string) error {
		asked = append(asked, dir)
		if dir == "/tmp/mine" || dir == "/var/tmp/mine" {
			return nil
		}
		return errors.New("owned by uid 1001")
	}
	h := Host{Home: []string{"/home/u", "/srv/home/u"}, State: []string{"/var/cache/u/sandbox-run"}, Own: own}
	for _, tt := range []struct {
		dir     string
		refused string // a word of the reason; "" means accepted
	}{
		{"/home/u/src/proj", ""},
		{"/home/u/.x-not-a-dot-dir-of-a-parent/..no", "dot-directory"},
		{"/home/u", "home directory"},
		{"/home", "system directory"},
		{"/srv", "holds your home"},
		{"/home/u/.config", "dot-directory"},
		{"/home/u/.config/app", "dot-directory"},
		{"/home/u/.ssh", "dot-directory"},
		{"/home/u/.cache/sandbox-run", "dot-directory"},
		{"/srv/home/u/.local/share", "dot-directory"},
		{"/home/u/src/.config", ""}, // a project's own dot-dir is the project's
		{"/home/user2", ""},
		{"/home/u2/.config", ""},
		{"/var/cache/u/sandbox-run", "own state"},
		{"/var/cache/u/sandbox-run/runs", "own state"},
		{"/var/cache/u", "own state"},
		{"/var/cache/u2", ""},
		{"/etc", "system directory"},
		{"/", "system directory"},
		{"/var", "system directory"},
		{"/opt", "system directory"},
		{"/etc/cron.d", "lies in /etc"},
		{"/boot/efi", "lies in /boot"},
		{"/sys/fs/cgroup", "lies in /sys"},
		{"/dev/pts", "lies in /dev"},
		{"/proc/self", "lies in /proc"},
		{"/usr/src/app", ""}, // a job's own place by Docker's convention
		{"/var/www/site", ""},
		{"/opt/app", ""},
		{"/tmp", "shared by the host's users"},
		{"/var/tmp", "shared by the host's users"},
		{"/private/tmp", "shared by the host's users"},
		{"/dev/shm", "shared by the host's users"},
		{"/dev/shm/x", "lies in /dev/shm"},
		{"/run", "shared by the host's users"},
		{"/run/user/1000", "lies in /run"},
		{"/run/user/1000/job", "lies in /run"},
		{"/var/run", "shared by the host's users"},
		{"/var/run/docker", "lies in /var/run"},
		{"/var/lock/x", "lies in /var/lock"},
		{"/var/spool/cron", "lies in /var/spool"},
		{"/var/mail/u", "lies in /var/mail"},
		{"/var/crash", "shared by the host's users"},
		{"/tmp/mine/sub", ""},
		{"/var/tmp/mine", ""},
		{"/tmp/.X11-unix", "not yours alone"},
		{"/tmp/theirs/sub/deeper", "not yours alone"},
		{"/tmpfoo", ""}, // whole components only
	} {
		err := h.CheckWritable(tt.dir, tt.dir)
		if tt.refused == "" {
			if err != nil {
				t.Errorf("%s: %v, want accepted", tt.dir, err)
			}
			continue
		}
		var ie *InvalidError
		if !errors.As(err, &ie) || !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), tt.refused) ||
			!strings.Contains(err.Error(), tt.dir) || ie.Fix == "" {
			t.Errorf("%s: %v, want a refusal naming %q and a fix", tt.dir, err, tt.refused)
		}
	}
	// Own is asked about the directory directly in /tmp, never a deeper one.
	if !slices.Contains(asked, "/tmp/theirs") || slices.Contains(asked, "/tmp/theirs/sub") {
		t.Errorf("Own asked about %v, want /tmp/theirs and not below", asked)
	}
	// The zero Host refuses only the system directories and shared places.
	for _, d := range []string{"/home/u", "/tmp/theirs/sub"} {
		if err := (Host{}).CheckWritable(d, d); err != nil {
			t.Errorf("zero Host: %v", err)
		}
	}
	if err := (Host{}).CheckWritable("/run/user/1000", "/run/user/1000"); err == nil {
		t.Error("zero Host accepts /run/user/1000")
	}
	// The resolved spelling is named with the given one.
	if err := h.CheckWritable("/work/link", "/home/u"); err == nil || !strings.Contains(err.Error(), "/work/link (/home/u)") {
		t.Errorf("resolved spelling: %v", err)
	}
}

func TestParseErrorsSayWhere(t *testing.T) {
	for _, tt := range []struct{ in, want string }{
		{"{\"workdir\": \"/w\",\n \"alow_hosts\": []}", `unknown field "alow_hosts"; did you mean "allow_hosts"`},
		{"{\"Workdir\": \"/w\", \"TIMEOUTS\": \"1s\"}", `did you mean "timeout"`},
		{"{\"frobnicate\": 1}", "the fields are those of sandbox-run run's flags"},
		{"{\"workdir\": \"/w\",\n \"env\": {\"a\": \"1\",}}", "line 2, column 19: invalid character '}'"},
		{"{\"workdir\": \"/w\",\n \"env\": {\"a\": \"1\"}", "line 2, column 19: the JSON ends early"},
	} {
		_, err := Parse(strings.NewReader(tt.in))
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("Parse(%q) = %v, want %q", tt.in, err, tt.want)
		}
	}
}

func TestHomeSessionCaches(t *testing.T) {
	ok := []Policy{
		{Workdir: "/w", Session: "claude-proj.1"},
		{Workdir: "/w", Home: "/h", Caches: []string{"npm", "go", "pip", "cargo", "uv"}},
	}
	for _, p := range ok {
		if err := p.Validate(); err != nil {
			t.Errorf("%+v: %v", p, err)
		}
	}
	for _, tt := range []struct {
		p    Policy
		want string
	}{
		{Policy{Workdir: "/w", Session: "../x"}, "not a session name"},
		{Policy{Workdir: "/w", Session: ".hidden"}, "not a session name"},
		{Policy{Workdir: "/w", Session: strings.Repeat("a", 65)}, "not a session name"},
		{Policy{Workdir: "/w", Session: "a/b"}, "not a session name"},
		{Policy{Workdir: "/w", Session: "s", Home: "/h"}, "both --home and --session"},
		{Policy{Workdir: "/w", Home: "h"}, "absolute"},
		{Policy{Workdir: "/w", Home: "/etc"}, "system directory"},
		{Policy{Workdir: "/w", Caches: []string{"maven"}}, `"maven" is not a cache`},
		{Policy{Workdir: "/w", Caches: []string{"npm", "npm"}}, "twice"},
	} {
		if err := tt.p.Validate(); err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%+v: %v, want %q", tt.p, err, tt.want)
		}
	}
	if got := (Policy{Workdir: "/w"}).DefaultEnv()["HOME"]; got != "/tmp" {
		t.Errorf("default HOME = %q, want /tmp (never the workdir)", got)
	}
	if got := (Policy{Workdir: "/w", Home: "/h"}).DefaultEnv()["HOME"]; got != "/h" {
		t.Errorf("HOME with Home = %q", got)
	}
	if got := CacheEnv("go", "/c/go"); got["GOMODCACHE"] != "/c/go/mod" || got["GOCACHE"] != "/c/go/build" {
		t.Errorf("CacheEnv(go) = %v", got)
	}
}

// TestTmpfsDefaults: zero sizes get the documented ceilings, given ones stay.
func TestTmpfsDefaults(t *testing.T) {
	d := Policy{Workdir: "/w"}.WithDefaults()
	if d.TmpSize != 256<<20 || d.ShmSize != 64<<20 {
		t.Errorf("defaults: tmp %d, shm %d; want 256 MiB and 64 MiB", d.TmpSize, d.ShmSize)
	}
	g := Policy{Workdir: "/w", TmpSize: 1 << 20, ShmSize: 2 << 20}.WithDefaults()
	if g.TmpSize != 1<<20 || g.ShmSize != 2<<20 {
		t.Errorf("given sizes changed: tmp %d, shm %d", g.TmpSize, g.ShmSize)
	}
	p, err := Parse(strings.NewReader(`{"workdir":"/w","shm_size":1048576}`))
	if err != nil || p.ShmSize != 1<<20 {
		t.Errorf("profile shm_size: %d, %v", p.ShmSize, err)
	}
}
