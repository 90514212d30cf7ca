// Package policy holds the one value that describes what a sandbox may do.
//
// A Policy is pure data: it is built from flags and profile files, checked by
// Validate, and read by the mechanisms (bubblewrap on Linux, Seatbelt on
// macOS) that enforce it. Nothing in this package touches the file system or
// the process; existence and permission checks belong to the sandbox that
// enforces the policy.
//
// # Zero values deny
//
// An empty Write list means no writable directory but the workdir; an empty
// Env means the command gets only the defaults named by DefaultEnv; an empty
// AllowHosts means no egress at all. This is the opposite of os/exec, where a
// nil Env inherits everything.
package policy

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"reflect"
	"strings"
	"time"
)

// Mode selects the mechanism that enforces a policy.
type Mode string

// Modes. Off is tier 0: a plain process with a cleared environment. It runs
// only when asked for by name, never as a fallback.
const (
	ModeAuto     Mode = "auto"
	ModeBwrap    Mode = "bwrap"
	ModeSeatbelt Mode = "seatbelt"
	// ModeLandlock is Linux tier 1 without user namespaces: Landlock and
	// the seccomp filter on the host's PID and network namespaces. Auto
	// never picks it; the run's report names what it loses against bwrap.
	ModeLandlock Mode = "landlock"
	ModeOff      Mode = "off"
	// ModeGvisor is tier 2 (Linux): runsc, the command's system calls
	// served by gVisor's kernel. Asked for by name only; auto never
	// picks it.
	ModeGvisor Mode = "gvisor"
)

// DefaultUID and DefaultGID are the host ids a sandbox runs under when
// sandbox-run itself runs as root: the command is never host uid 0.
const (
	DefaultUID = 65534
	DefaultGID = 65534
)

// DefaultTmpSize caps the private /tmp when the policy names no size.
const DefaultTmpSize = 256 << 20

// DefaultShmSize caps the private /dev/shm (POSIX shared memory) when the
// policy names no size; 64 MiB is what container runtimes give by default.
const DefaultShmSize = 64 << 20

// NoMemoryLimit is the Memory value that turns the default memory ceiling
// off: --memory none, "memory": "none" in a profile. It is the one
// negative value Validate accepts for Memory.
const NoMemoryLimit = -1

// DefaultPids is the process ceiling of a run whose policy names none
// (Pids zero): tasks (processes and threads) of the whole sandbox, where
// the mechanism can hold one (Linux: bwrap and tier 0). Podman's default;
// far above what a build or a tool server needs, far below what exhausts
// a node's pid space.
const DefaultPids = 2048

// DefaultProtected lists the paths, relative to every writable directory,
// that the command cannot change as a host-side tool would read them: what
// a later shell, editor, agent harness, package manager or CI reads and
// acts on by running a program or loading a server. An existing one is held
// read-only for the whole run; a missing one the command creates is moved
// to a quarantine once the run (and every concurrent run on the same
// directory) has ended (see the sandbox package).
//
// Deliberately not listed: AGENTS.md, CLAUDE.md, Makefiles, package.json
// and its scripts, and source files in general. They are the agent's own
// work product; a host tool reads them, but a person reviews them.
var defaultProtected = []string{
	// Shell startup and logout files of sh, bash, zsh and fish.
	".profile", ".bashrc", ".bash_profile", ".bash_login", ".bash_logout",
	".zshenv", ".zprofile", ".zshrc", ".zlogin", ".zlogout", ".config/fish",
	// direnv runs .envrc when a shell enters the directory.
	".envrc",
	// Agent and editor configs that load tools or servers on their own.
	".mcp.json", ".claude", ".codex", ".cursor", ".gemini", ".vscode", ".idea",
	".zed", ".amazonq", ".roo", ".continue", ".devcontainer",
	// Package-manager rc files that run code or redirect registries.
	".npmrc", ".yarnrc", ".yarnrc.yml", ".pnpmfile.cjs",
	// Git: submodule URLs; CI that runs on the next push.
	".gitmodules", ".github/workflows",
}

// GitHeld lists the parts of a git directory that make git run a program
// (core.fsmonitor, core.hooksPath, filters, aliases, hooks) or say where
// the rest is read from (commondir). They are held in every git directory
// a writable directory holds; the rest (objects, refs, HEAD, the index,
// logs) stays writable, so that commit, branch and checkout work.
var gitHeld = []string{"config", "config.worktree", "hooks", "commondir", "info/attributes"}

// GitHeld returns a copy of the held parts of a git directory.
func GitHeld() []string { return append([]string(nil), gitHeld...) }

// DefaultProtected returns a copy of the built-in protected paths.
func DefaultProtected() []string { return append([]string(nil), defaultProtected...) }

// IsDefaultProtected reports whether name is one of DefaultProtected.
func IsDefaultProtected(name string) bool {
	for _, d := range defaultProtected {
		if d == name {
			return true
		}
	}
	return false
}

// ProtectedNames returns the protected paths of p relative to each
// writable directory (and the absolute ones of Protect): the defaults minus
// Unprotect, then Protect, each once.
func (p Policy) ProtectedNames() []string {
	drop := map[string]bool{}
	for _, u := range p.Unprotect {
		drop[filepath.Clean(u)] = true
	}
	var out []string
	seen := map[string]bool{}
	for _, n := range append(append([]string(nil), defaultProtected...), p.Protect...) {
		if !drop[n] && !seen[n] {
			seen[n] = true
			out = append(out, n)
		}
	}
	return out
}

// Policy says what a sandboxed command may do. The zero value, once given a
// Workdir, is the strictest useful policy.
type Policy struct {
	// Workdir is writable, mounted at the same path, and the command's
	// current directory. Absolute.
	Workdir string `json:"workdir,omitempty"`
	// Write lists further writable directories, each at the same path.
	Write []string `json:"write,omitempty"`
	// Read lists further paths mounted read-only at the same path.
	Read []string `json:"read,omitempty"`
	// Protect adds protected paths: relative ones apply inside every
	// writable directory, absolute ones must lie in one.
	Protect []string `json:"protect,omitempty"`
	// Unprotect removes built-in protected paths (DefaultProtected) by
	// name. It exists only in profiles, and every removal is a warning in
	// the run's report.
	Unprotect []string `json:"unprotect,omitempty"`
	// Env is the command's environment on top of DefaultEnv. Nothing of the
	// caller's environment is passed unless named here or in PassEnv.
	Env map[string]string `json:"env,omitempty"`
	// PassEnv names variables copied from the caller's environment when the
	// run starts (see Environ).
	PassEnv []string `json:"pass_env,omitempty"`
	// AllowHosts is the egress allow-list. Empty means no egress.
	AllowHosts []string `json:"allow_hosts,omitempty"`
	// Presets name sets of allow-list entries for common registries and
	// APIs (see Presets); ApplyPresets adds their hosts to AllowHosts.
	Presets []string `json:"presets,omitempty"`
	// AllowHTTP are method and path rules (httprule syntax); the hosts
	// they name are TLS-terminated and implicitly allowed (docs/tls.md).
	AllowHTTP []string `json:"allow_http,omitempty"`
	// UpstreamCA is a PEM file whose CAs, instead of the system roots,
	// verify the hosts AllowHTTP terminates.
	UpstreamCA string `json:"upstream_ca,omitempty"`
	// EgressSocket, when set, is a node-wide egress proxy used instead of
	// the built-in one.
	EgressSocket string `json:"egress_socket,omitempty"`
	// LLMSocket, when set, is forwarded to a loopback port inside, whose
	// URL the command finds in SANDBOX_LLM_URL.
	LLMSocket string `json:"llm_socket,omitempty"`
	// LLMEnv names further variables that get the LLM channel's URL (such
	// as ANTHROPIC_BASE_URL).
	LLMEnv []string `json:"llm_env,omitempty"`
	// Secrets are credentials kept outside: inside, each Name holds a
	// placeholder the proxy swaps for the value (see Secret).
	Secrets []Secret `json:"secrets,omitempty"`
	// LLMKeyEnv names the caller's variable that holds the LLM provider's
	// key: inside it holds a placeholder, and the key is added on the host
	// side of the LLM channel (LLMSocket), or, without one, swapped in by
	// the proxy for the provider's host (LLMProviderHost).
	LLMKeyEnv string `json:"llm_key_env,omitempty"`
	// Ptrace widens the seccomp filter to allow ptrace for this run.
	Ptrace bool `json:"ptrace,omitempty"`
	// Sandbox picks the mechanism; empty means ModeAuto.
	Sandbox Mode `json:"sandbox,omitempty"`
	// UID and GID are the host ids the sandbox runs under when the caller is
	// root. Zero means DefaultUID/DefaultGID; uid 0 itself is refused.
	UID int `json:"uid,omitempty"`
	GID int `json:"gid,omitempty"`
	// TmpSize caps the private /tmp in bytes; zero means DefaultTmpSize.
	TmpSize int64 `json:"tmp_size,omitempty"`
	// ShmSize caps the private /dev/shm in bytes; zero means DefaultShmSize.
	ShmSize int64 `json:"shm_size,omitempty"`
	// Timeout ends the whole sandbox after this long; zero means none.
	Timeout Duration `json:"timeout,omitempty"`
	// Memory caps the memory of the whole sandbox in bytes; Pids its tasks;
	// CPUTime its CPU time; NoFile each process's open files; FSize the
	// size of a file it writes. Zero means no limit, except for Memory,
	// where zero means the default ceiling (half the host's memory, see
	// the sandbox package) and NoMemoryLimit none, and for Pids, where
	// zero means DefaultPids on Linux.
	Memory  int64    `json:"memory,omitempty"`
	Pids    int64    `json:"pids,omitempty"`
	CPUTime Duration `json:"cpu_time,omitempty"`
	NoFile  int64    `json:"nofile,omitempty"`
	FSize   int64    `json:"fsize,omitempty"`
	// Home is a host directory that becomes the command's $HOME: writable,
	// at the same path, checked like a Write directory. Empty means the
	// private /tmp (nothing lands in the workdir). It must exist.
	Home string `json:"home,omitempty"`
	// Session names a home that sandbox-run keeps in its data directory
	// and that persists between the runs of the same session; it replaces
	// Home. Letters, digits, '.', '_' and '-', up to 64 bytes.
	Session string `json:"session,omitempty"`
	// Caches names the shared toolchain caches to bind writable, each at
	// its own path in sandbox-run's cache directory, with the variables
	// that point the tool at it (see CacheVars). They are shared by every
	// run of the same user (and, as root, of the same sandbox uid), never
	// between users.
	Caches []string `json:"caches,omitempty"`
	// Toolchains are directories put on the command's PATH ahead of the
	// system directories, in order (see ToolchainPath); each must also be
	// shown inside (a system path or under a Read path): PATH only names.
	Toolchains []string `json:"toolchains,omitempty"`
	// CgroupBase is a delegated cgroup v2 directory to create the run's
	// cgroup in; empty means find one, or fall back to rlimits and sampling.
	CgroupBase string `json:"cgroup_base,omitempty"`
	// The hand-ins (handin.go): the user's ssh-agent through a filter,
	// known_hosts, named Unix sockets, host ports and published ports.
	HandIn
}

// Duration is a time.Duration that reads and writes as a Go duration string
// ("90s") in profile files.
type Duration time.Duration

// MarshalJSON implements json.Marshaler.
func (d Duration) MarshalJSON() ([]byte, error) { return json.Marshal(time.Duration(d).String()) }

// UnmarshalJSON implements json.Unmarshaler.
func (d *Duration) UnmarshalJSON(b []byte) error {
	var s string
	if err := json.Unmarshal(b, &s); err != nil {
		return fmt.Errorf("duration must be a string such as \"90s\": %w", err)
	}
	v, err := parseDuration(s)
	if err != nil {
		return err
	}
	*d = Duration(v)
	return nil
}

// ErrInvalid marks a policy that cannot be enforced as written.
var ErrInvalid = errors.New("invalid policy")

// InvalidError names the field and the fix.
type InvalidError struct {
	Field  string
	Reason string
	Fix    string
}

func (e *InvalidError) Error() string {
	return fmt.Sprintf("policy: %s: %s", e.Field, e.Detail())
}

// Is matches ErrInvalid.
func (e *InvalidError) Is(target error) bool { return target == ErrInvalid }

// Detail is the error without the field's name: the reason and the fix,
// for a caller that names the field its own way (a settings key).
func (e *InvalidError) Detail() string {
	if e.Fix == "" {
		return e.Reason
	}
	return e.Reason + "; fix: " + e.Fix
}

func invalid(field, reason, fix string) error {
	return &InvalidError{Field: field, Reason: reason, Fix: fix}
}

// MaxProfileSize is the largest profile Parse reads. A profile is a short
// list of paths and hosts; anything bigger is a mistake or an attack on the
// parser.
const MaxProfileSize = 1 << 20

// Parse reads a profile (JSON, the same field names as the flags; sizes as
// a number of bytes or a string spelt as for the flags, see ParseSize;
// durations as strings, see ParseDuration). Unknown
// fields, a field given twice, a profile over MaxProfileSize and anything
// after the object are refused, so that a typo or a smuggled second value
// never silently changes a restriction.
func Parse(r io.Reader) (Policy, error) {
	b, err := io.ReadAll(io.LimitReader(r, MaxProfileSize+1))
	if err != nil {
		return Policy{}, fmt.Errorf("policy: profile: %w", err)
	}
	if len(b) > MaxProfileSize {
		return Policy{}, fmt.Errorf("policy: profile: larger than %d bytes", MaxProfileSize)
	}
	if err := uniqueKeys(b); err != nil {
		return Policy{}, fmt.Errorf("policy: profile: %w", err)
	}
	if b, err = profileSizes(b); err != nil {
		return Policy{}, fmt.Errorf("policy: profile: %w", err)
	}
	var p Policy
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&p); err != nil {
		var te *json.UnmarshalTypeError
		if errors.As(err, &te) && te.Field != "" {
			return Policy{}, fmt.Errorf("policy: profile: %s: field %q: a JSON %s where %s is expected", lineCol(b, te.Offset), te.Field, te.Value, jsonKind(te.Type.Kind().String()))
		}
		var se *json.SyntaxError
		if errors.As(err, &se) {
			// Offset counts the offending byte itself.
			return Policy{}, fmt.Errorf("policy: profile: %s: %w", lineCol(b, se.Offset-1), err)
		}
		if name, ok := strings.CutPrefix(err.Error(), `json: unknown field "`); ok {
			name = strings.TrimSuffix(name, `"`)
			return Policy{}, fmt.Errorf("policy: profile: unknown field %q%s", name, didYouMean(name))
		}
		if errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, io.EOF) {
			return Policy{}, fmt.Errorf("policy: profile: %s: the JSON ends early (a missing } or ])", lineCol(b, int64(len(b))))
		}
		return Policy{}, fmt.Errorf("policy: profile: %w", err)
	}
	if _, err := dec.Token(); err != io.EOF {
		return Policy{}, fmt.Errorf("policy: profile: trailing data after the JSON object")
	}
	return p, nil
}

// lineCol says where byte offset off of b lies, as "line L, column C"
// (both from 1, columns in bytes).
func lineCol(b []byte, off int64) string {
	if off > int64(len(b)) {
		off = int64(len(b))
	}
	line, col := 1, 1
	for _, c := range b[:off] {
		if c == '\n' {
			line, col = line+1, 1
		} else {
			col++
		}
	}
	return fmt.Sprintf("line %d, column %d", line, col)
}

// didYouMean names the profile field closest to name (at most two edits
// away, case ignored), as "; did you mean \"x\"", or "" when none is.
func didYouMean(name string) string {
	best, bestD := "", 3
	t := reflect.TypeFor[Policy]()
	for i := range t.NumField() {
		tag, _, _ := strings.Cut(t.Field(i).Tag.Get("json"), ",")
		if tag == "" || tag == "-" {
			continue
		}
		if d := editDistance(strings.ToLower(name), tag); d < bestD {
			best, bestD = tag, d
		}
	}
	if best == "" {
		return "; the fields are those of sandbox-run run's flags, with _ for -"
	}
	return fmt.Sprintf("; did you mean %q", best)
}

// editDistance is the Levenshtein distance of a and b, in bytes.
func editDistance(a, b string) int {
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			sub := prev[j-1]
			if a[i-1] != b[j-1] {
				sub++
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, sub)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}

// jsonKind names a Go kind the way a profile's author knows it.
func jsonKind(k string) string {
	switch k {
	case "slice", "array":
		return "a list"
	case "map", "struct":
		return "an object"
	case "string":
		return "a string"
	case "bool":
		return "true or false"
	}
	return "a number"
}

// uniqueKeys refuses a profile that is not one JSON object or that names a
// field twice: encoding/json would keep the last value without a word.
// Decode reports any other syntax error.
func uniqueKeys(b []byte) error {
	dec := json.NewDecoder(bytes.NewReader(b))
	tok, err := dec.Token()
	if err != nil {
		return nil
	}
	if d, ok := tok.(json.Delim); !ok || d != '{' {
		return errors.New("not a JSON object; a profile is {\"workdir\": ..., ...}")
	}
	seen := map[string]bool{}
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return nil
		}
		k, _ := tok.(string)
		if seen[k] {
			return fmt.Errorf("field %q given twice", k)
		}
		seen[k] = true
		var skip json.RawMessage
		if err := dec.Decode(&skip); err != nil {
			return nil
		}
	}
	return nil
}

// systemRoots are directories that a writable bind would expose to the
// command for writing as the system itself. Below them a directory may be
// a job's own (/usr/src/app, /var/www/site, /opt/app); systemTrees and
// sharedPlaces name where it may not.
var systemRoots = []string{"/", "/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32",
	"/etc", "/proc", "/dev", "/sys", "/boot", "/home", "/opt", "/var"}

// systemTrees are system directories in which no directory may be writable
// either: the system's configuration (a file in /etc/cron.d runs as root),
// its boot files, and the kernel's and devices' file systems.
var systemTrees = []string{"/etc", "/boot", "/proc", "/sys", "/dev"}

// A sharedPlace is a directory that the host's users and services share:
// what lies there belongs to many, and services keep their sockets there
// (a Unix socket accepts connect() from anyone who can reach it, whatever
// the mount's flags). within says whether the directories in it are
// refused too (anyone's may hold a service: /run/user/UID holds the
// session bus and gpg-agent), or only the place itself, with a directory
// in it accepted when it is the caller's own (Host.Own): /tmp/tmp.XXXX of
// mktemp -d. The /private spellings are macOS's.
type sharedPlace struct {
	dir, what string
	within    bool
}

var sharedPlaces = []sharedPlace{
	{"/tmp", "every user's and service's temporary files and sockets (X11, ssh-agent, tmux)", false},
	{"/var/tmp", "every user's and service's temporary files", false},
	{"/private/tmp", "every user's and service's temporary files and sockets", false},
	{"/private/var/tmp", "every user's and service's temporary files", false},
	{"/dev/shm", "every process's shared memory and semaphores", true},
	{"/run", "the services' and login sessions' sockets and state (/run/user/UID: your session bus, gpg-agent)", true},
	{"/var/run", "the services' and login sessions' sockets and state", true},
	{"/private/var/run", "the services' sockets and state", true},
	{"/var/lock", "every service's lock files", true},
	{"/var/spool", "the spools system daemons act on (cron, mail, print)", true},
	{"/var/mail", "every user's mail", true},
	{"/var/crash", "every program's crash dumps", true},
}

// Host names the caller's own directories that no writable directory may
// expose, each in every spelling the caller knows (as given, and resolved).
// The zero Host refuses only the system directories and the shared places;
// Validate uses it, and a sandbox that can read the host fills it in (see
// sandbox.Run).
type Host struct {
	// Home lists the user's home directory: as $HOME names it and as the
	// passwd entry of the effective uid does, each also resolved.
	Home []string
	// State lists sandbox-run's own state directories: its cache (the
	// bwrap detection cache and the run journals) and its data directory
	// (sessions' homes and shared caches, bound only as themselves).
	State []string
	// Own says whether dir, a directory directly in a shared place such
	// as /tmp, is the caller's alone (nil error) or why not. Nil (the zero
	// Host) accepts the directories in such a place, which only the host
	// can tell apart.
	Own func(dir string) error
}

// CheckWritable refuses the writable directory d (absolute and clean;
// spelled is how the caller named it, for the message) when making it
// writable would hand the command the system, what the host's users and
// services share, or the caller's own state:
//
//   - a system directory (/, /usr, /etc, /var, ...), or one in /etc, /boot,
//     /proc, /sys or /dev;
//   - a shared place (/tmp, /var/tmp, /dev/shm, /run, /var/run, /var/lock,
//     /var/spool, /var/mail, /var/crash) or, except in /tmp and /var/tmp,
//     one in it; in /tmp and /var/tmp a directory whose top directory
//     there is not the caller's own (Host.Own);
//   - the home directory, or a parent of it (it holds the home);
//   - a directory in one of the home's dot-directories (~/.config, ~/.ssh,
//     ~/.cache, ~/.local, any ~/.X), where the user's shell, git, editors and
//     keys read their settings: ~/.bash_login, ~/.gitconfig;
//   - a State directory, one that holds it, or one inside it.
//
// The error wraps ErrInvalid (an *InvalidError) and names the directory,
// the reason and the fix. CheckWritable compares strings and calls Own;
// resolving links is the caller's (call it once per spelling).
// Non-guarantee: a directory elsewhere can hold a socket too; the sandbox
// searches every writable directory for them (see the sandbox package).
func (h Host) CheckWritable(spelled, d string) error {
	named := spelled
	if d != spelled {
		named = fmt.Sprintf("%s (%s)", spelled, d)
	}
	if err := checkSystem(named, d); err != nil {
		return err
	}
	if err := h.checkShared(named, d); err != nil {
		return err
	}
	return h.checkOwnState(named, d)
}

const writableField = "write"

// checkSystem refuses the system directories and what lies in systemTrees.
func checkSystem(named, d string) error {
	for _, s := range systemRoots {
		if d == s {
			return invalid(writableField, fmt.Sprintf("%s is a system directory and cannot be writable", named),
				"use a job directory of its own")
		}
	}
	for _, s := range systemTrees {
		if Within(d, s) && !Within(d, "/dev/shm") {
			return invalid(writableField, fmt.Sprintf("%s lies in %s, a system directory, and cannot be writable", named, s),
				"use a job directory of its own")
		}
	}
	return nil
}

// checkShared refuses a shared place, what lies in one that is refused
// whole, and a directory in /tmp or /var/tmp that is not the caller's own.
func (h Host) checkShared(named, d string) error {
	const fix = "make a directory of your own for the job (mktemp -d), or use a project directory"
	for _, sp := range sharedPlaces {
		switch {
		case d == sp.dir:
			return invalid(writableField, fmt.Sprintf("%s is shared by the host's users and services: it holds %s, which the command could reach or impersonate", named, sp.what), fix)
		case !Within(d, sp.dir):
			continue
		case sp.within:
			return invalid(writableField, fmt.Sprintf("%s lies in %s, which holds %s", named, sp.dir, sp.what), fix)
		case h.Own != nil:
			first, _, _ := strings.Cut(d[len(sp.dir)+1:], "/")
			top := sp.dir + "/" + first
			if err := h.Own(top); err != nil {
				return invalid(writableField, fmt.Sprintf("%s lies in %s, which is not yours alone (%v): others can put sockets and files there", named, top, err), fix)
			}
		}
	}
	return nil
}

// checkOwnState refuses the home, what holds it, its dot-directories and
// sandbox-run's own state.
func (h Host) checkOwnState(named, d string) error {
	const fix = "use a project directory; or --write a specific subdirectory outside the home's dot-directories"
	for _, home := range h.Home {
		if home == "" || home == "/" {
			continue
		}
		switch {
		case d == home:
			return invalid(writableField, fmt.Sprintf("%s is your home directory: the command could write your shell, git and tool settings (~/.bash_login, ~/.gitconfig)", named), fix)
		case Within(home, d):
			return invalid(writableField, fmt.Sprintf("%s holds your home directory %s", named, home), fix)
		case Within(d, home):
			if first, _, _ := strings.Cut(d[len(home)+1:], "/"); strings.HasPrefix(first, ".") {
				return invalid(writableField, fmt.Sprintf("%s lies in %s, a dot-directory of your home where settings, keys and caches live", named, home+"/"+first), fix)
			}
		}
	}
	for _, st := range h.State {
		if st != "" && (Within(d, st) || Within(st, d)) {
			return invalid(writableField, fmt.Sprintf("%s is, holds or lies in sandbox-run's own state %s (its bwrap detection cache, run journals, sessions' homes and shared caches)", named, st), fix)
		}
	}
	return nil
}

// Within reports whether p is dir or lies below it, comparing whole
// components. Both are absolute and clean (as a checked Policy's paths
// are); for other spellings the answer is not defined.
func Within(p, dir string) bool {
	if dir == "/" {
		return true
	}
	return p == dir || strings.HasPrefix(p, dir+"/")
}

// maxSessionName bounds a session name: it is one path component.
const maxSessionName = 64

func checkSession(name string) error {
	if name == "" {
		return nil
	}
	ok := len(name) <= maxSessionName && name != "." && name != ".." && !strings.HasPrefix(name, ".")
	for _, c := range name {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '.' || c == '_' || c == '-') {
			ok = false
		}
	}
	if !ok {
		return invalid("session", fmt.Sprintf("%q is not a session name", name),
			fmt.Sprintf("use letters, digits, '.', '_' and '-' (not first), up to %d bytes, e.g. --session claude-myproject", maxSessionName))
	}
	return nil
}

func (p Policy) validateHome() error {
	if err := checkSession(p.Session); err != nil {
		return err
	}
	if p.Session != "" && p.Home != "" {
		return invalid("home", "both --home and --session name the home", "pass one of them")
	}
	seen := map[string]bool{}
	for _, c := range p.Caches {
		if _, ok := LookupPackageManager(c); !ok {
			return invalid("cache", fmt.Sprintf("%q is not a cache sandbox-run knows", c), "name one of "+strings.Join(CacheNames(), ", "))
		}
		if seen[c] {
			return invalid("cache", fmt.Sprintf("%q given twice", c), "name each cache once")
		}
		seen[c] = true
	}
	return nil
}

func checkPath(field, p string) error {
	if err := CheckPath(field, p); err != nil {
		return err
	}
	if !filepath.IsAbs(p) {
		return invalid(field, fmt.Sprintf("%q is not an absolute path", p), "give an absolute path")
	}
	return nil
}

// CheckPath refuses a path that cannot mean what it looks like: empty, with
// a NUL byte (it would split bwrap's argument stream), with a control
// character (it would forge lines in messages and audit logs), or with a
// ".." component (resolved by string, not through the file system: with a
// symlink before it, "a/link/../b" names another place than the kernel
// would reach). It does not require the path to be absolute: Validate does.
func CheckPath(field, p string) error {
	if p == "" {
		return invalid(field, "empty path", "name a path")
	}
	if err := noNUL(field, p); err != nil {
		return err
	}
	for _, r := range p {
		if r < 0x20 || r == 0x7f {
			return invalid(field, fmt.Sprintf("%q holds a control character", p), "rename the path, or pass one without control characters")
		}
	}
	for _, c := range strings.Split(p, "/") {
		if c == ".." {
			return invalid(field, fmt.Sprintf("%q has a '..' component", p), "pass the path as the file system resolves it (realpath prints it)")
		}
	}
	return nil
}

func noNUL(field, s string) error {
	if strings.IndexByte(s, 0) >= 0 {
		return invalid(field, "contains a NUL byte", "remove the NUL byte: it would resynchronise bwrap's argument stream")
	}
	return nil
}

func checkEnvName(k string) error {
	if k == "" || strings.ContainsAny(k, "=\x00") {
		return invalid("env", fmt.Sprintf("%q is not a variable name", k), "use KEY=VALUE with a KEY free of '=' and NUL")
	}
	return nil
}

// isEnvName reports whether k is a portable variable name (POSIX: letters,
// digits and '_', not starting with a digit): the only names a PassEnv
// entry can look up in a shell-started environment.
func isEnvName(k string) bool {
	if k == "" || (k[0] >= '0' && k[0] <= '9') {
		return false
	}
	for _, c := range []byte(k) {
		if !(c == '_' || c >= '0' && c <= '9' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z') {
			return false
		}
	}
	return true
}

// MissingPassEnv returns the PassEnv names that lookup does not find, in
// order: Environ leaves them unset, and the caller should say so.
func (p Policy) MissingPassEnv(lookup func(string) (string, bool)) []string {
	var out []string
	for _, k := range p.PassEnv {
		if lookup == nil {
			out = append(out, k)
			continue
		}
		if _, ok := lookup(k); !ok {
			out = append(out, k)
		}
	}
	return out
}

// WithDefaults returns a copy with every zero field that has a default
// filled in. It does not touch the caller's slices or maps.
func (p Policy) WithDefaults() Policy {
	q := p
	q.Workdir = filepath.Clean(p.Workdir)
	q.Write = cleanAll(p.Write)
	q.Read = cleanAll(p.Read)
	if p.Home != "" {
		q.Home = filepath.Clean(p.Home)
	}
	if q.Sandbox == "" {
		q.Sandbox = ModeAuto
	}
	if q.UID == 0 {
		q.UID = DefaultUID
	}
	if q.GID == 0 {
		q.GID = DefaultGID
	}
	if q.TmpSize == 0 {
		q.TmpSize = DefaultTmpSize
	}
	if q.ShmSize == 0 {
		q.ShmSize = DefaultShmSize
	}
	return q
}

func cleanAll(in []string) []string {
	if in == nil {
		return nil
	}
	out := make([]string, len(in))
	for i, s := range in {
		out[i] = filepath.Clean(s)
	}
	return out
}

// Writable returns the workdir followed by the --write dirs.
func (p Policy) Writable() []string {
	w := append([]string{p.Workdir}, p.Write...)
	if p.Home != "" {
		w = append(w, p.Home)
	}
	return w
}

// ProtectedPaths returns every protected path as an absolute path inside
// each writable directory, built-in ones first, then the held parts of a
// top-level .git directory (GitHeld), in a stable order. Mechanisms that
// match paths (Seatbelt) deny writes to exactly these; bwrap finds git
// directories at any depth itself.
func (p Policy) ProtectedPaths() []string {
	var out []string
	names := p.ProtectedNames()
	for _, w := range p.Writable() {
		for _, name := range names {
			if filepath.IsAbs(name) {
				continue
			}
			out = append(out, filepath.Join(w, name))
		}
		for _, g := range gitHeld {
			out = append(out, filepath.Join(w, ".git", g))
		}
	}
	for _, name := range p.Protect {
		if filepath.IsAbs(name) {
			out = append(out, filepath.Clean(name))
		}
	}
	return out
}

// DefaultEnv is what every command gets unless the policy's Env overrides
// it: a PATH of the system directories, HOME at Home or else at the private
// /tmp (never the workdir: tools' dot-files would land in the project), and
// TMPDIR at the private /tmp.
func (p Policy) DefaultEnv() map[string]string {
	home := p.Home
	if home == "" {
		home = "/tmp"
	}
	return map[string]string{
		"PATH":   p.toolchainPath("/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"),
		"HOME":   home,
		"TMPDIR": "/tmp",
		"LANG":   "C.UTF-8",
	}
}

// Environ returns the command's environment as sorted KEY=VALUE strings:
// DefaultEnv, then PassEnv looked up with lookup, then Env. A PassEnv name
// that lookup does not find is left unset. Values containing NUL are
// refused.
func (p Policy) Environ(lookup func(string) (string, bool)) ([]string, error) {
	m := p.DefaultEnv()
	for _, k := range p.PassEnv {
		if lookup == nil {
			break
		}
		if v, ok := lookup(k); ok {
			if err := noNUL("pass-env "+k, v); err != nil {
				return nil, err
			}
			m[k] = v
		}
	}
	for k, v := range p.Env {
		m[k] = v
	}
	out := make([]string, 0, len(m))
	for k, v := range m {
		out = append(out, k+"="+v)
	}
	sortStrings(out)
	return out, nil
}
