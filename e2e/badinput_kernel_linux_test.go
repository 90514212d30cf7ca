package e2e

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/sandbox-run/sandbox-run/internal/sandboxtest"
)

// badInput is one malformed call of sandbox-run. In args, {W} is a usable
// workdir, {D} the directory around it, {F} a regular file, {L} a symlink
// to {W}, {P} the profile (written from profile when that is set), {M}
// a marker that names this row's command in /proc if it ever runs, {R} a
// symlink to /, {S} a Unix socket's inode, {N} a directory nested 66
// levels deep (the sandbox's own, so it could be a workdir) and {T} a
// directory directly in /tmp that anyone may write, with a directory job
// in it that is the sandbox's own.
type badInput struct {
	name    string
	args    []string
	profile string
	env     []string // added to the environment, after {X} substitution
	code    int      // 0 means 125
	want    []string // each must appear in the one line
}

// cmdArgs is the command of every row that takes one: it would be found
// in /proc by its marker if a refused run started it anyway.
// ("; :" keeps sh from exec'ing sleep, which would drop the marker.)
var cmdArgs = []string{"--", "/bin/sh", "-c", "sleep 5; :", "{M}"}

func withCmd(a ...string) []string { return append(a, cmdArgs...) }

func badInputs() []badInput {
	many := func(n int, a ...string) []string {
		var out []string
		for range n {
			out = append(out, a...)
		}
		return out
	}
	huge := append([]string{"run", "--workdir", "{W}", "--", "/bin/true"}, many(9001, "x")...)
	return []badInput{
		// flags
		{name: "unknown flag", args: withCmd("run", "--workdir", "{W}", "--frob"), want: []string{"--frob"}},
		{name: "unknown subcommand", args: []string{"frobnicate"}, want: []string{`"frobnicate"`}},
		{name: "repeated workdir", args: withCmd("run", "--workdir", "{W}", "--workdir", "{D}"), want: []string{"--workdir", "more than once"}},
		{name: "repeated timeout", args: withCmd("run", "--workdir", "{W}", "--timeout", "1s", "--timeout", "1h"), want: []string{"--timeout", "more than once"}},
		{name: "repeated bool", args: withCmd("run", "--workdir", "{W}", "--dry-run", "--dry-run"), want: []string{"--dry-run", "more than once"}},
		{name: "command without -- still checked", args: []string{"run", "--workdir", "{W}", "--tmp-size", "lots", "/bin/sh", "-c", "sleep 5; :", "{M}"}, want: []string{"--tmp-size"}},
		{name: "only dashes", args: []string{"run", "--workdir", "{W}", "--", "--", "--"}, want: []string{"no command"}},
		{name: "no command", args: []string{"run", "--workdir", "{W}"}, want: []string{"no command"}},
		// paths
		{name: "empty workdir", args: withCmd("run", "--workdir", ""), want: []string{"--workdir", "empty"}},
		{name: "empty read", args: withCmd("run", "--workdir", "{W}", "--read", ""), want: []string{"--read", "empty"}},
		{name: "empty write", args: withCmd("run", "--workdir", "{W}", "--write", ""), want: []string{"--write", "empty"}},
		{name: "relative workdir in profile", args: withCmd("run", "--config", "{P}"), profile: `{"workdir":"w"}`, want: []string{`"w"`, "absolute"}},
		{name: "relative read in profile", args: withCmd("run", "--workdir", "{W}", "--config", "{P}"), profile: `{"read":["etc"]}`, want: []string{`"etc"`, "absolute"}},
		{name: "newline in path", args: withCmd("run", "--workdir", "{W}", "--read", "/usr/sh\nare"), want: []string{`"/usr/sh\nare"`, "control character"}},
		{name: "dot-dot in workdir", args: withCmd("run", "--workdir", "{W}/../w"), want: []string{"/../w", "'..'"}},
		{name: "dot-dot in read", args: withCmd("run", "--workdir", "{W}", "--read", "/usr/../etc"), want: []string{"/usr/../etc", "'..'"}},
		{name: "dot-dot in profile", args: withCmd("run", "--config", "{P}"), profile: `{"workdir":"/tmp/../etc"}`, want: []string{"/tmp/../etc", "'..'"}},
		{name: "nonexistent read", args: withCmd("run", "--workdir", "{W}", "--read", "{D}/absent"), want: []string{"/absent", "does not exist"}},
		{name: "unreadable read", args: withCmd("run", "--workdir", "{W}", "--read", "{D}/closed/inner"), want: []string{"/closed"}},
		{name: "nonexistent workdir", args: withCmd("run", "--workdir", "{D}/absent"), want: []string{"/absent", "does not exist"}},
		{name: "workdir is a file", args: withCmd("run", "--workdir", "{F}"), want: []string{"{F}", "not a directory", "--workdir {D}"}},
		{name: "symlinked workdir", args: withCmd("run", "--workdir", "{L}"), want: []string{"{L}", "symlink", "{W}"}},
		{name: "write missing", args: withCmd("run", "--workdir", "{W}", "--write", "{D}/absent"), want: []string{"--write {D}/absent", "does not exist", "mkdir -p {D}/absent"}},
		{name: "write is a file", args: withCmd("run", "--workdir", "{W}", "--write", "{F}"), want: []string{"--write {F}", "not a directory"}},
		{name: "allow localhost", args: withCmd("run", "--workdir", "{W}", "--allow-host", "localhost:8080"), want: []string{"localhost", "loopback"}},
		{name: "seatbelt on Linux", args: withCmd("run", "--workdir", "{W}", "--sandbox", "seatbelt"), want: []string{"only on macOS", "leave out --sandbox"}},
		{name: "session name with slash", args: withCmd("run", "--workdir", "{W}", "--session", "../x"), want: []string{`"../x"`, "not a session name"}},
		{name: "session name empty", args: withCmd("run", "--workdir", "{W}", "--session", ""), want: []string{"--session", "empty"}},
		{name: "session and home", args: withCmd("run", "--workdir", "{W}", "--session", "s", "--home", "{D}"), want: []string{"--home and --session"}},
		{name: "unknown cache", args: withCmd("run", "--workdir", "{W}", "--cache", "maven"), want: []string{`"maven"`, "cargo, go, npm, pip, uv"}},
		{name: "cache twice", args: withCmd("run", "--workdir", "{W}", "--cache", "npm", "--cache", "npm"), want: []string{`"npm"`, "twice"}},
		{name: "home missing", args: withCmd("run", "--workdir", "{W}", "--home", "{D}/absent"), want: []string{"--home {D}/absent", "does not exist"}},
		{name: "home is the workdir's parent", args: withCmd("run", "--workdir", "{W}", "--home", "/etc"), want: []string{"/etc", "system directory"}},
		{name: "home in a dot-dir of home", args: withCmd("run", "--workdir", "{W}", "--home", "{D}/.config"), env: []string{"HOME={D}"}, want: []string{"{D}/.config", "dot-directory"}},
		{name: "session under tier 0", args: withCmd("run", "--workdir", "{W}", "--sandbox", "off", "--session", "s"), want: []string{"session", "tier 0"}},
		{name: "tty without a terminal", args: withCmd("run", "--workdir", "{W}", "--tty"), want: []string{"--tty", "not a terminal"}},
		{name: "tty and no-tty", args: withCmd("run", "--workdir", "{W}", "--tty", "--no-tty"), want: []string{"--tty and --no-tty"}},
		{name: "mcp tty", args: withCmd("mcp", "--workdir", "{W}", "--tty"), want: []string{"--tty", "MCP"}},
		{name: "read of /", args: withCmd("run", "--workdir", "{W}", "--read", "/"), want: []string{"--read /", "/proc, /dev, /tmp"}},
		{name: "read of /proc", args: withCmd("run", "--workdir", "{W}", "--read", "/proc"), want: []string{"--read /proc", "host's /proc"}},
		{name: "read of a host pid", args: withCmd("run", "--workdir", "{W}", "--read", "/proc/1"), want: []string{"--read /proc/1", "host's /proc"}},
		{name: "read of /dev/shm", args: withCmd("run", "--workdir", "{W}", "--read", "/dev/shm"), want: []string{"--read /dev/shm", "host's /dev"}},
		{name: "read of /tmp", args: withCmd("run", "--workdir", "{W}", "--read", "/tmp"), want: []string{"--read /tmp", "host's /tmp"}},
		{name: "read of /sys", args: withCmd("run", "--workdir", "{W}", "--read", "/sys"), want: []string{"--read /sys", "host's /sys"}},
		{name: "read of /run", args: withCmd("run", "--workdir", "{W}", "--read", "/run"), want: []string{"--read /run", "host's /run"}},
		{name: "read of / through a link", args: withCmd("run", "--workdir", "{W}", "--read", "{R}"), want: []string{"--read {R}", "resolves to /,"}},
		{name: "read of a socket", args: withCmd("run", "--workdir", "{W}", "--read", "{S}"), want: []string{"--read {S}", "is a socket", "not supported"}},
		{name: "read too deep to search", args: withCmd("run", "--workdir", "{W}", "--read", "{N}"), want: []string{"--read {N}", "deeper than 64", "narrower"}},
		{name: "system dir writable", args: withCmd("run", "--workdir", "{W}", "--write", "/etc"), want: []string{"/etc", "system directory"}},
		{name: "dir in /etc writable", args: withCmd("run", "--workdir", "{W}", "--write", "/etc/cron.d"), want: []string{"/etc/cron.d", "lies in /etc"}},
		{name: "workdir /tmp", args: withCmd("run", "--workdir", "/tmp"), want: []string{"/tmp is shared", "sockets", "mktemp -d"}},
		{name: "write /var/tmp", args: withCmd("run", "--workdir", "{W}", "--write", "/var/tmp"), want: []string{"/var/tmp is shared"}},
		{name: "write /dev/shm", args: withCmd("run", "--workdir", "{W}", "--write", "/dev/shm"), want: []string{"/dev/shm is shared", "shared memory"}},
		{name: "write /run/user", args: withCmd("run", "--workdir", "{W}", "--write", "/run/user"), want: []string{"/run/user lies in /run", "gpg-agent"}},
		{name: "write /var/run/lock", args: withCmd("run", "--workdir", "{W}", "--write", "/var/run/lock"), want: []string{"/var/run/lock lies in /var/run"}},
		{name: "write a mail spool", args: withCmd("run", "--workdir", "{W}", "--write", "/var/spool/mail"), want: []string{"/var/spool/mail lies in /var/spool"}},
		{name: "workdir in a /tmp dir not yours alone", args: withCmd("run", "--workdir", "{T}/job"), want: []string{"{T}/job lies in {T}", "not yours alone", "others may write it"}},
		{name: "workdir too deep to search", args: withCmd("run", "--workdir", "{N}"), want: []string{"writable dir {N}", "deeper than 64", "narrower"}},
		{name: "protect outside", args: withCmd("run", "--workdir", "{W}", "--protect", "../x"), want: []string{"../x"}},
		{name: "unprotect not a default", args: withCmd("run", "--workdir", "{W}", "--config", "{P}"), profile: `{"unprotect":["Makefile"]}`, want: []string{`"Makefile"`, "not a built-in protected path", "fix:"}},
		// --sandbox landlock keeps a copy of each existing protected path
		// (it cannot hold one read-only); a link there is refused as
		// under bwrap, never followed into the copy.
		{name: "landlock with a protected path that is a link", args: withCmd("run", "--sandbox", "landlock", "--workdir", "{D}", "--protect", "link"),
			want: []string{"protected path {L} is a symbolic link (to {W})", "rm {L}"}},
		{name: "check of an unknown mechanism", args: []string{"check", "--sandbox", "gvisorr"}, code: 2, want: []string{`"gvisorr"`, "--sandbox landlock"}},
		{name: "bwrap missing", args: withCmd("run", "--workdir", "{W}", "--bwrap", "{D}/absent-bwrap"), want: []string{"absent-bwrap", "install bubblewrap"}},
		{name: "egress socket is a file", args: withCmd("run", "--workdir", "{W}", "--egress-socket", "{F}", "--allow-host", "example.com"), want: []string{"{F}"}},
		{name: "TMPDIR out of reach", args: withCmd("run", "--workdir", "{W}", "--allow-host", "example.com"), env: []string{"TMPDIR={D}/closed"}, want: []string{"{D}/closed", "TMPDIR"}},
		{name: "TMPDIR in the workdir", args: withCmd("run", "--workdir", "{W}", "--allow-host", "example.com"), env: []string{"TMPDIR={W}"}, want: []string{"TMPDIR {W} lies in a writable directory", "point TMPDIR at"}},
		{name: "report dir missing", args: withCmd("run", "--workdir", "{W}", "--report", "{D}/absent/r.json"), want: []string{"--report", "/absent"}},
		{name: "audit left by refusal", args: withCmd("run", "--workdir", "{W}", "--audit", "{D}/audit.jsonl", "--read", "{D}/absent"), want: []string{"/absent"}},
		// files sandbox-run opens on the host (report, audit, profile, socket)
		{name: "report in workdir", args: withCmd("run", "--workdir", "{W}", "--report", "{W}/r.json"), want: []string{"--report", "{W}/r.json", "writable dir"}},
		{name: "audit in workdir", args: withCmd("run", "--workdir", "{W}", "--audit", "{W}/a.jsonl"), want: []string{"--audit", "{W}/a.jsonl", "writable dir"}},
		{name: "report through a link to workdir", args: withCmd("run", "--workdir", "{W}", "--report", "{L}/r.json"), want: []string{"--report", "{L}/r.json", "writable dir"}},
		{name: "audit through a link outside", args: withCmd("run", "--workdir", "{D}/closed", "--audit", "{L}/a.jsonl"), want: []string{"--audit", "{L}/a.jsonl"}},
		{name: "report is a directory", args: withCmd("run", "--workdir", "{W}", "--report", "{D}/closed"), want: []string{"--report", "{D}/closed", "not a regular file"}},
		{name: "profile through a link", args: withCmd("run", "--workdir", "{W}", "--config", "{L}/p.json"), want: []string{"--config", "{L}/p.json"}},
		{name: "mcp audit in workdir", args: withCmd("mcp", "--workdir", "{W}", "--audit", "{W}/a.jsonl"), want: []string{"--audit", "{W}/a.jsonl", "writable dir"}},
		{name: "proxy audit through a link", args: []string{"proxy", "--listen", "{D}/p.sock", "--audit", "{L}/a.jsonl"}, want: []string{"--audit", "{L}/a.jsonl"}},
		{name: "proxy listen through a link", args: []string{"proxy", "--listen", "{L}/p.sock"}, want: []string{"{L}/p.sock", "symbolic link"}},
		// writable dirs that expose the user's own state
		{name: "workdir is home", args: withCmd("run", "--workdir", "{W}"), env: []string{"HOME={W}"}, want: []string{"{W}", "home directory", "project directory"}},
		{name: "workdir holds home", args: withCmd("run", "--workdir", "{W}"), env: []string{"HOME={W}/me"}, want: []string{"{W}", "holds your home"}},
		{name: "write in a dot-dir of home", args: withCmd("run", "--workdir", "{W}", "--write", "{D}/.config/app"), env: []string{"HOME={D}"}, want: []string{"{D}/.config/app", "dot-directory"}},
		{name: "write is home's .ssh", args: withCmd("run", "--workdir", "{W}", "--write", "{D}/.ssh"), env: []string{"HOME={D}"}, want: []string{"{D}/.ssh", "dot-directory"}},
		{name: "write is the cache", args: withCmd("run", "--workdir", "{W}", "--write", "{D}/xdg/sandbox-run"), env: []string{"XDG_CACHE_HOME={D}/xdg"}, want: []string{"{D}/xdg/sandbox-run", "own state"}},
		{name: "cache through a link", args: withCmd("run", "--workdir", "{W}"), env: []string{"XDG_CACHE_HOME={R}{D}/xdg"}, want: []string{"cannot lock the run journals", "without a symbolic link"}},
		{name: "write holds the cache", args: withCmd("run", "--workdir", "{W}", "--write", "{D}/xdg"), env: []string{"XDG_CACHE_HOME={D}/xdg"}, want: []string{"{D}/xdg", "own state"}},
		{name: "mcp workdir is home", args: withCmd("mcp", "--workdir", "{W}"), env: []string{"HOME={W}"}, want: []string{"{W}", "home directory"}},
		// sizes of things
		{name: "command over bwrap's 9000 arguments", args: huge, want: []string{"9000"}},
		{name: "binds over bwrap's 9000 arguments", args: withCmd(append([]string{"run", "--workdir", "{W}"}, many(3001, "--read", "/usr/share")...)...), want: []string{"9000"}},
		// allow-list
		{name: "allow-host star star", args: withCmd("run", "--workdir", "{W}", "--allow-host", "**.example.com"), want: []string{`"**.example.com"`}},
		{name: "allow-host bare star", args: withCmd("run", "--workdir", "{W}", "--allow-host", "*"), want: []string{`"*"`}},
		{name: "allow-host url", args: withCmd("run", "--workdir", "{W}", "--allow-host", "http://example.com"), want: []string{`"http://example.com"`}},
		{name: "allow-host IPv6 zone", args: withCmd("run", "--workdir", "{W}", "--allow-host", "fe80::1%eth0"), want: []string{`"fe80::1%eth0"`}},
		{name: "allow-host bracketed zone", args: withCmd("run", "--workdir", "{W}", "--allow-host", "[fe80::1%25eth0]:443"), want: []string{"fe80::1%25eth0"}},
		{name: "allow-host port too big", args: withCmd("run", "--workdir", "{W}", "--allow-host", "example.com:65536"), want: []string{"65536", "1 to 65535"}},
		{name: "allow-host port zero", args: withCmd("run", "--workdir", "{W}", "--allow-host", "example.com:0"), want: []string{`"example.com:0"`}},
		{name: "allow-host empty", args: withCmd("run", "--workdir", "{W}", "--allow-host", ""), want: []string{"allow-host", "empty"}},
		// profiles
		{name: "profile not JSON", args: withCmd("run", "--workdir", "{W}", "--config", "{P}"), profile: `{"workdir":`, want: []string{"{P}", "profile"}},
		{name: "profile unknown field", args: withCmd("run", "--workdir", "{W}", "--config", "{P}"), profile: `{"alow_hosts":["x.com"]}`, want: []string{`"alow_hosts"`, `did you mean "allow_hosts"`}},
		{name: "profile syntax error", args: withCmd("run", "--workdir", "{W}", "--config", "{P}"), profile: "{\"env\": {\"A\": \"1\",\n}}", want: []string{"line 2, column 1", "invalid character"}},
		{name: "profile field twice", args: withCmd("run", "--workdir", "{W}", "--config", "{P}"), profile: `{"allow_hosts":[],"allow_hosts":["*.com"]}`, want: []string{`"allow_hosts"`, "twice"}},
		{name: "profile oversized", args: withCmd("run", "--workdir", "{W}", "--config", "{P}"), profile: `{"env":{"A":"` + strings.Repeat("x", 2<<20) + `"}}`, want: []string{"larger than"}},
		{name: "profile trailing data", args: withCmd("run", "--workdir", "{W}", "--config", "{P}"), profile: `{} {}`, want: []string{"trailing"}},
		{name: "profile not an object", args: withCmd("run", "--workdir", "{W}", "--config", "{P}"), profile: `["x"]`, want: []string{"not a JSON object"}},
		{name: "profile wrong type", args: withCmd("run", "--workdir", "{W}", "--config", "{P}"), profile: `{"memory":"lots"}`, want: []string{"memory"}},
		{name: "profile bad duration", args: withCmd("run", "--workdir", "{W}", "--config", "{P}"), profile: `{"timeout":"soon"}`, want: []string{`"soon"`}},
		{name: "profile NUL in env value", args: withCmd("run", "--workdir", "{W}", "--config", "{P}"), profile: `{"env":{"A":"x\u0000y"}}`, want: []string{"NUL"}},
		{name: "profile env name with =", args: withCmd("run", "--workdir", "{W}", "--config", "{P}"), profile: `{"env":{"A=B":"c"}}`, want: []string{`"A=B"`}},
		{name: "profile missing", args: withCmd("run", "--workdir", "{W}", "--config", "{D}/absent.json"), want: []string{"absent.json"}},
		// environment
		{name: "env without name", args: withCmd("run", "--workdir", "{W}", "--env", "=x"), want: []string{"--env", "KEY=VALUE"}},
		{name: "env without =", args: withCmd("run", "--workdir", "{W}", "--env", "NOVALUE"), want: []string{"--env", "KEY=VALUE"}},
		{name: "pass-env with =", args: withCmd("run", "--workdir", "{W}", "--pass-env", "A=B"), want: []string{`"A=B"`}},
		{name: "pass-env invalid name", args: withCmd("run", "--workdir", "{W}", "--pass-env", "MY-TOKEN"), want: []string{"pass-env", `"MY-TOKEN"`, "not a variable name"}},
		{name: "pass-env leading digit", args: withCmd("run", "--workdir", "{W}", "--pass-env", "1X"), want: []string{"pass-env", `"1X"`}},
		{name: "profile pass-env invalid", args: withCmd("run", "--workdir", "{W}", "--config", "{P}"), profile: `{"pass_env":["A B"]}`, want: []string{"pass-env", `"A B"`}},
		{name: "mcp pass-env invalid", args: withCmd("mcp", "--workdir", "{W}", "--pass-env", "A.B"), want: []string{"pass-env", `"A.B"`}},
		{name: "llm-env without socket", args: withCmd("run", "--workdir", "{W}", "--llm-env", "X"), want: []string{"llm-socket"}},
		// sizes and durations
		{name: "memory unit", args: withCmd("run", "--workdir", "{W}", "--memory", "12X"), want: []string{`"12X"`}},
		{name: "memory MB ambiguous", args: withCmd("run", "--workdir", "{W}", "--memory", "512MB"), want: []string{"--memory", `"512MB"`, "ambiguous", "512M"}},
		{name: "fsize GB ambiguous", args: withCmd("run", "--workdir", "{W}", "--fsize", "1GB"), want: []string{"--fsize", `"1GB"`, "ambiguous"}},
		{name: "tmp-size KB ambiguous", args: withCmd("run", "--workdir", "{W}", "--tmp-size", "64KB"), want: []string{"--tmp-size", `"64KB"`, "ambiguous"}},
		{name: "memory fraction", args: withCmd("run", "--workdir", "{W}", "--memory", "1.5G"), want: []string{"--memory", `"1.5G"`}},
		{name: "profile memory MB ambiguous", args: withCmd("run", "--workdir", "{W}", "--config", "{P}"), profile: `{"memory":"512MB"}`, want: []string{`"memory"`, `"512MB"`, "ambiguous"}},
		{name: "profile tmp_size unit", args: withCmd("run", "--workdir", "{W}", "--config", "{P}"), profile: `{"tmp_size":"1X"}`, want: []string{`"tmp_size"`, `"1X"`}},
		{name: "profile cpu_time without unit", args: withCmd("run", "--workdir", "{W}", "--config", "{P}"), profile: `{"cpu_time":"30"}`, want: []string{`"30"`, "unit"}},
		{name: "cpu-time without unit", args: withCmd("run", "--workdir", "{W}", "--cpu-time", "30"), want: []string{"--cpu-time", `"30"`}},
		{name: "memory zero", args: withCmd("run", "--workdir", "{W}", "--memory", "0"), want: []string{"--memory"}},
		{name: "memory overflow", args: withCmd("run", "--workdir", "{W}", "--memory", "99999999999T"), want: []string{"--memory"}},
		// Policy.Validate's rules, the same in every mode (TestUniformRefusal
		// runs them through each): before, tier 0 ran these or failed late.
		{name: "memory below 1M", args: withCmd("run", "--workdir", "{W}", "--memory", "512K"), want: []string{"memory", "524288", "minimum", "--memory 1M"}},
		{name: "memory below 1M in tier 0", args: withCmd("run", "--sandbox", "off", "--workdir", "{W}", "--memory", "512K"), want: []string{"memory", "minimum"}},
		{name: "nofile below 4", args: withCmd("run", "--workdir", "{W}", "--nofile", "3"), want: []string{"nofile", "--nofile 4"}},
		{name: "allow-host bad in tier 0", args: withCmd("run", "--sandbox", "off", "--workdir", "{W}", "--allow-host", "exa mple.com"), want: []string{`"exa mple.com"`, "whitespace"}},
		{name: "absolute protect outside the writable dirs", args: withCmd("run", "--workdir", "{W}", "--protect", "{D}/x"), want: []string{"{D}/x", "not inside a writable directory"}},
		{name: "tmp-size negative", args: withCmd("run", "--workdir", "{W}", "--tmp-size", "-1"), want: []string{"-1"}},
		{name: "shm-size negative", args: withCmd("run", "--workdir", "{W}", "--shm-size", "-1"), want: []string{"--shm-size", "-1"}},
		{name: "shm-size zero", args: withCmd("run", "--workdir", "{W}", "--shm-size", "0"), want: []string{"--shm-size 0", "uncapped"}},
		{name: "shm-size word", args: withCmd("run", "--workdir", "{W}", "--shm-size", "lots"), want: []string{"--shm-size", `"lots"`}},
		{name: "shm-size empty", args: withCmd("run", "--workdir", "{W}", "--shm-size", ""), want: []string{"--shm-size"}},
		{name: "profile shm_size negative", args: withCmd("run", "--workdir", "{W}", "--config", "{P}"), profile: `{"shm_size":-1}`, want: []string{"shm-size", "negative"}},
		{name: "pids fraction", args: withCmd("run", "--workdir", "{W}", "--pids", "1.5"), want: []string{`"1.5"`}},
		{name: "timeout word", args: withCmd("run", "--workdir", "{W}", "--timeout", "soon"), want: []string{`"soon"`, "--timeout"}},
		{name: "timeout negative", args: withCmd("run", "--workdir", "{W}", "--timeout", "-5s"), want: []string{"timeout", "negative"}},
		{name: "cpu-time zero", args: withCmd("run", "--workdir", "{W}", "--cpu-time", "0s"), want: []string{"--cpu-time"}},
		{name: "user zero", args: withCmd("run", "--workdir", "{W}", "--user", "0"), want: []string{`"0"`}},
		{name: "user too big", args: withCmd("run", "--workdir", "{W}", "--user", "4294967296"), want: []string{`"4294967296"`}},
		{name: "unknown mode", args: withCmd("run", "--workdir", "{W}", "--sandbox", "docker"), want: []string{`"docker"`}},
		// tier 2
		{name: "runsc missing", args: withCmd("run", "--workdir", "{W}", "--sandbox", "gvisor", "--runsc", "{D}/absent-runsc"), want: []string{"absent-runsc", "apt-get install -y runsc"}},
		{name: "runsc in the workdir", args: withCmd("run", "--workdir", "{W}", "--sandbox", "gvisor", "--runsc", "{W}"), want: []string{"lies in writable directory", "outside every --workdir"}},
		{name: "runsc empty", args: withCmd("run", "--workdir", "{W}", "--sandbox", "gvisor", "--runsc", ""), want: []string{"--runsc", "empty"}},
		{name: "gvisor with pids", args: withCmd("run", "--workdir", "{W}", "--sandbox", "gvisor", "--pids", "64"), want: []string{"--pids", "cgroup"}},
		// proxy
		{name: "proxy without listen", args: []string{"proxy"}, want: []string{"--listen"}},
		{name: "proxy listen dir missing", args: []string{"proxy", "--listen", "{D}/absent/p.sock"}, want: []string{"/absent/p.sock"}},
		{name: "proxy listen on a file", args: []string{"proxy", "--listen", "{F}"}, want: []string{"{F}", "not a socket"}},
		{name: "proxy bad allow-list", args: []string{"proxy", "--listen", "{D}/p.sock", "--audit", "{D}/p.audit", "--allow-host", "*."}, want: []string{`"*."`}},
		{name: "proxy bad mode", args: []string{"proxy", "--listen", "{D}/p.sock", "--mode", "777"}, want: []string{`"777"`}},
		{name: "proxy unknown owner", args: []string{"proxy", "--listen", "{D}/p.sock", "--owner", "sbx-no-such-user"}, want: []string{"--owner", "sbx-no-such-user"}},
		{name: "proxy unknown group", args: []string{"proxy", "--listen", "{D}/p.sock", "--group", "sbx-no-such-group"}, want: []string{"--group", "sbx-no-such-group"}},
		{name: "proxy owner out of range", args: []string{"proxy", "--listen", "{D}/p.sock", "--owner", "-5"}, want: []string{"--owner", "out of range"}},
		{name: "proxy bad profile", args: []string{"proxy", "--listen", "{D}/p.sock", "--config", "{P}"}, profile: `{"allow_hosts":"x.com"}`, want: []string{"allow_hosts"}},
		{name: "proxy listen twice", args: []string{"proxy", "--listen", "{D}/p.sock", "--listen", "{D}/q.sock"}, want: []string{"--listen", "more than once"}},
		// mcp
		{name: "mcp without server", args: []string{"mcp", "--workdir", "{W}"}, want: []string{"no server"}},
		{name: "mcp max-message negative", args: withCmd("mcp", "--workdir", "{W}", "--max-message", "-1"), want: []string{"--max-message -1"}},
		{name: "mcp max-message huge", args: withCmd("mcp", "--workdir", "{W}", "--max-message", "99999999999"), want: []string{"--max-message"}},
		{name: "mcp empty tool pattern", args: withCmd("mcp", "--workdir", "{W}", "--allow-tool", ""), want: []string{"--allow-tool", "empty"}},
		{name: "mcp malformed deny-tool glob", args: withCmd("mcp", "--workdir", "{W}", "--deny-tool", "["), want: []string{`--deny-tool "["`, "not glob syntax"}},
		{name: "mcp class in allow-tool", args: withCmd("mcp", "--workdir", "{W}", "--allow-tool", "read_[a-z]*"), want: []string{"--allow-tool", "not glob syntax"}},
		{name: "mcp brace in deny-prompt", args: withCmd("mcp", "--workdir", "{W}", "--deny-prompt", "{a,b}"), want: []string{"--deny-prompt", "not glob syntax"}},
		{name: "mcp escape in allow-resource", args: withCmd("mcp", "--workdir", "{W}", "--allow-resource", `file:///\*`), want: []string{"--allow-resource", "not glob syntax"}},
		{name: "mcp unknown server request", args: withCmd("mcp", "--workdir", "{W}", "--deny-server-request", "tools/call"), want: []string{"--deny-server-request", "sampling/createMessage"}},
		{name: "mcp audit-args value", args: withCmd("mcp", "--workdir", "{W}", "--audit-args=full"), want: []string{"--audit-args=full", "raw"}},
		{name: "mcp max-pending zero", args: withCmd("mcp", "--workdir", "{W}", "--max-pending", "0"), want: []string{"--max-pending 0"}},
		{name: "mcp pin-update without pin", args: withCmd("mcp", "--workdir", "{W}", "--pin-update"), want: []string{"--pin-update", "--pin FILE"}},
		{name: "mcp pin in the workdir", args: withCmd("mcp", "--workdir", "{W}", "--pin", "{W}/pins.json"), want: []string{"--pin", "writable dir"}},
		{name: "mcp pin through a symlink", args: withCmd("mcp", "--workdir", "{W}", "--pin", "{L}/pins.json"), want: []string{"--pin", "{L}"}},
		{name: "mcp pin not a pin file", args: withCmd("mcp", "--workdir", "{W}", "--pin", "{F}"), want: []string{"--pin", "not a pin file", "--pin-update"}},
		{name: "mcp listen-remote without listen", args: withCmd("mcp", "--workdir", "{W}", "--listen-remote"), want: []string{"--listen-remote without --listen"}},
		{name: "mcp token-file without listen", args: withCmd("mcp", "--workdir", "{W}", "--token-file", "{F}"), want: []string{"--token-file without --listen"}},
		{name: "mcp listen not host:port", args: withCmd("mcp", "--workdir", "{W}", "--listen", "8765"), want: []string{`--listen "8765"`, "HOST:PORT"}},
		{name: "mcp listen on a name", args: withCmd("mcp", "--workdir", "{W}", "--listen", "example.com:80"), want: []string{"--listen", "not an IP address"}},
		{name: "mcp listen not loopback", args: withCmd("mcp", "--workdir", "{W}", "--listen", "0.0.0.0:0"), want: []string{"--listen 0.0.0.0:0", "not a loopback address", "--listen-remote"}},
		{name: "mcp listen empty", args: withCmd("mcp", "--workdir", "{W}", "--listen", ""), want: []string{"--listen"}},
		{name: "mcp listen with pin", args: withCmd("mcp", "--workdir", "{W}", "--listen", "127.0.0.1:0", "--pin", "{D}/pins.json"), want: []string{"--pin with --listen"}},
		{name: "mcp listen with report", args: withCmd("mcp", "--workdir", "{W}", "--listen", "127.0.0.1:0", "--report", "{D}/r.json"), want: []string{"--report with --listen", "--audit"}},
		{name: "mcp max-sessions zero", args: withCmd("mcp", "--workdir", "{W}", "--listen", "127.0.0.1:0", "--max-sessions", "0"), want: []string{"--max-sessions 0"}},
		{name: "mcp session-idle tiny", args: withCmd("mcp", "--workdir", "{W}", "--listen", "127.0.0.1:0", "--session-idle", "1ms"), want: []string{`--session-idle "1ms"`}},
		{name: "mcp allow-origin not an origin", args: withCmd("mcp", "--workdir", "{W}", "--listen", "127.0.0.1:0", "--allow-origin", "evil.example"), want: []string{`--allow-origin "evil.example"`, "scheme://host"}},
		{name: "mcp allow-origin null", args: withCmd("mcp", "--workdir", "{W}", "--listen", "127.0.0.1:0", "--allow-origin", "null"), want: []string{`--allow-origin "null"`}},
		{name: "mcp token-file in workdir", args: withCmd("mcp", "--workdir", "{W}", "--listen", "127.0.0.1:0", "--token-file", "{W}/tok"), want: []string{"--token-file", "writable dir"}},
		{name: "mcp token-file through a symlink", args: withCmd("mcp", "--workdir", "{W}", "--listen", "127.0.0.1:0", "--token-file", "{L}/tok"), want: []string{"--token-file", "{L}"}},
		{name: "mcp token-file readable by others", args: withCmd("mcp", "--workdir", "{W}", "--listen", "127.0.0.1:0", "--token-file", "{F}"), want: []string{"--token-file", "chmod 600"}},
		{name: "mcp token-file missing", args: withCmd("mcp", "--workdir", "{W}", "--listen", "127.0.0.1:0", "--token-file", "{D}/none"), want: []string{"--token-file", "{D}/none"}},
		{name: "mcp audit-line-max small", args: withCmd("mcp", "--workdir", "{W}", "--audit-line-max", "100"), want: []string{"--audit-line-max 100"}},
		{name: "mcp dry-run", args: withCmd("mcp", "--workdir", "{W}", "--dry-run"), want: []string{"--dry-run"}},
		{name: "mcp repeated workdir", args: withCmd("mcp", "--workdir", "{W}", "--workdir", "{W}"), want: []string{"--workdir", "more than once"}},
		{name: "mcp symlinked workdir", args: withCmd("mcp", "--workdir", "{L}"), want: []string{"{L}", "symlink"}},
		// setup (the host refusal, which depends on the distribution, is in setup_kernel_linux_test.go)
		{name: "setup argument", args: []string{"setup", "extra"}, want: []string{"no arguments", `"extra"`}},
		{name: "setup unknown flag", args: []string{"setup", "--frob"}, want: []string{"--frob"}},
		{name: "setup repeated dry-run", args: []string{"setup", "--dry-run", "--dry-run"}, want: []string{"--dry-run", "more than once"}},
		{name: "setup relative root", args: []string{"setup", "--root", "rel"}, want: []string{`"rel"`, "absolute"}},
		{name: "setup on a root without os-release", args: []string{"setup", "--dry-run", "--root", "{D}"}, want: []string{"cannot tell the distribution", "{D}/etc/os-release"}},
		// check: its usage code is 2
		{name: "check unknown flag", args: []string{"check", "--frob"}, code: 2, want: []string{"--frob"}},
		{name: "check argument", args: []string{"check", "extra"}, code: 2, want: []string{"no arguments"}},
		{name: "check unknown sandbox", args: []string{"check", "--sandbox", "bwrap"}, code: 2, want: []string{`"bwrap"`, "gvisor"}},
		{name: "check repeated flag", args: []string{"check", "--json", "--json"}, code: 2, want: []string{"--json", "more than once"}},
	}
}

// TestBadInput feeds sandbox-run malformed input of every kind. Each must be
// refused with its exit status and one line naming the input and a fix:
// never a panic or a stack trace, never a command started, never a file or
// directory left behind.
func TestBadInput(t *testing.T) {
	needBwrap(t)
	rows := badInputs()
	if len(rows) < 40 {
		t.Fatalf("%d rows; the table promises at least 40", len(rows))
	}
	cache := t.TempDir()
	t.Run("control", func(t *testing.T) {
		// The same command, not refused, is found running by its marker.
		w := sandboxtest.WorkDir(t)
		marker := "sbx-bad-" + randHex(t)
		c := exec.Command(bin, "run", "--workdir", w, "--", "/bin/sh", "-c", "sleep 5; :", marker)
		if err := c.Start(); err != nil {
			t.Fatal(err)
		}
		defer c.Wait()
		defer c.Process.Kill()
		for deadline := time.Now().Add(5 * time.Second); len(processesWith(marker)) == 0; time.Sleep(10 * time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatal("control: a command that does run is never seen by its marker")
			}
		}
	})
	for _, tt := range rows {
		t.Run(tt.name, func(t *testing.T) {
			d := sandboxtest.WorkDir(t)
			w := filepath.Join(d, "w")
			mustMkdir(t, w)
			sandboxtest.Chown(t, w)
			f := filepath.Join(d, "file")
			mustWrite(t, f, "x")
			l := filepath.Join(d, "link")
			if err := os.Symlink(w, l); err != nil {
				t.Fatal(err)
			}
			closed := filepath.Join(d, "closed")
			mustMkdir(t, filepath.Join(closed, "inner"))
			if err := os.Chmod(closed, 0o700); err != nil {
				t.Fatal(err)
			}
			if os.Geteuid() != 0 {
				// As ourselves only a mode that shuts us out too does it.
				os.Chmod(closed, 0)
				t.Cleanup(func() { os.Chmod(closed, 0o700) })
			}
			rootLink := filepath.Join(d, "rootlink")
			if err := os.Symlink("/", rootLink); err != nil {
				t.Fatal(err)
			}
			sock := filepath.Join(d, "svc.sock")
			sandboxtest.SocketInode(t, sock)
			deep := filepath.Join(d, "deep")
			mustMkdir(t, filepath.Join(deep, strings.Repeat("d/", 65)))
			p := filepath.Join(d, "profile.json")
			if tt.profile != "" {
				mustWrite(t, p, tt.profile)
			}
			sandboxtest.Chown(t, deep)
			openTop, err := os.MkdirTemp("/tmp", "sbx-open-")
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { os.RemoveAll(openTop) })
			mustMkdir(t, filepath.Join(openTop, "job"))
			sandboxtest.Chown(t, filepath.Join(openTop, "job"))
			if err := os.Chmod(openTop, 0o777); err != nil {
				t.Fatal(err)
			}
			tmp := filepath.Join(d, "tmp")
			mustMkdir(t, tmp)
			marker := "sbx-bad-" + randHex(t)
			subst := strings.NewReplacer("{W}", w, "{D}", d, "{F}", f, "{L}", l, "{P}", p, "{M}", marker,
				"{R}", rootLink, "{S}", sock, "{N}", deep, "{T}", openTop)
			args := make([]string, len(tt.args))
			for i, a := range tt.args {
				args[i] = subst.Replace(a)
			}
			before := tree(t, d)

			env := []string{"TMPDIR=" + tmp, "XDG_CACHE_HOME=" + cache}
			for _, e := range tt.env {
				env = append(env, subst.Replace(e))
			}
			r := runEnv(t, env, "", args...)

			want := tt.code
			if want == 0 {
				want = 125
			}
			if r.code != want {
				t.Fatalf("exit %d, want %d; stderr: %.300s", r.code, want, r.stderr)
			}
			msg := strings.TrimSuffix(r.stderr, "\n")
			if msg == "" || strings.Contains(msg, "\n") || !strings.HasPrefix(msg, "sandbox-run: ") {
				t.Errorf("stderr is not one line starting sandbox-run: %.500q", r.stderr)
			}
			if strings.Contains(r.stderr, "panic") || strings.Contains(r.stderr, "goroutine ") {
				t.Errorf("stderr shows a panic: %.500s", r.stderr)
			}
			if want == 125 && !strings.Contains(msg, "fix:") {
				t.Errorf("message names no fix: %.300s", msg)
			}
			for _, s := range tt.want {
				if s = subst.Replace(s); !strings.Contains(msg, s) {
					t.Errorf("message lacks %q: %.300s", s, msg)
				}
			}
			t.Log(msg)
			if r.stdout != "" {
				t.Errorf("stdout is not empty: %.200q", r.stdout)
			}
			if after := tree(t, d); !slices.Equal(before, after) {
				t.Errorf("left behind or removed: before %v, after %v", before, after)
			}
			if pids := processesWith(marker); len(pids) > 0 {
				t.Errorf("the refused command runs anyway: pids %v", pids)
			}
		})
	}
}

// tree lists every path under root, relative to it and sorted.
func tree(t *testing.T, root string) []string {
	t.Helper()
	var out []string
	err := filepath.WalkDir(root, func(p string, _ fs.DirEntry, err error) error {
		if err != nil {
			return nil // the closed directory, as non-root
		}
		rel, _ := filepath.Rel(root, p)
		out = append(out, rel)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(out)
	return out
}

// processesWith returns the pids whose command line holds marker.
func processesWith(marker string) []int {
	ents, _ := os.ReadDir("/proc")
	var pids []int
	for _, e := range ents {
		var pid int
		if _, err := fmt.Sscanf(e.Name(), "%d", &pid); err != nil {
			continue
		}
		b, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err == nil && strings.Contains(string(b), marker) {
			pids = append(pids, pid)
		}
	}
	return pids
}

func randHex(t *testing.T) string {
	var b [8]byte
	if _, err := rand.Read(b[:]); err != nil {
		t.Fatal(err)
	}
	return hex.EncodeToString(b[:])
}

func mustMkdir(t *testing.T, p string) {
	t.Helper()
	if err := os.MkdirAll(p, 0o755); err != nil {
		t.Fatal(err)
	}
}

func mustWrite(t *testing.T, p, s string) {
	t.Helper()
	if err := os.WriteFile(p, []byte(s), 0o644); err != nil {
		t.Fatal(err)
	}
}

// TestPassEnvUnsetWarns: --pass-env of a name that is not set in
// sandbox-run's environment is not an error (the run goes on) but says so
// in one warning line naming it. Control: the same name set passes its
// value and warns about nothing.
func TestPassEnvUnsetWarns(t *testing.T) {
	needBwrap(t)
	w := sandboxtest.WorkDir(t)
	name := "SBX_PASS_" + strings.ToUpper(randHex(t))
	args := []string{"run", "--workdir", w, "--pass-env", name, "--", "/bin/sh", "-c", `echo "v=${` + name + `-unset}"`}
	r := runEnv(t, nil, "", args...)
	if r.code != 0 || !strings.Contains(r.stdout, "v=unset") {
		t.Fatalf("exit %d stdout %q stderr %q, want the run to go on without it", r.code, r.stdout, r.stderr)
	}
	warn := "sandbox-run: warning: --pass-env " + name + ": not set"
	if !strings.Contains(r.stderr, warn) || strings.Count(r.stderr, "\n") != 1 {
		t.Errorf("stderr %q, want exactly one line holding %q", r.stderr, warn)
	}
	r = runEnv(t, []string{name + "=here"}, "", args...)
	if r.code != 0 || !strings.Contains(r.stdout, "v=here") || strings.Contains(r.stderr, "warning") {
		t.Errorf("control (set): exit %d stdout %q stderr %q, want the value passed and no warning", r.code, r.stdout, r.stderr)
	}
}
