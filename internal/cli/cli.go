// Package cli is sandbox-run's command line: flags, subcommands, exit
// statuses and printing. Everything a library user needs lives in the
// packages it calls.
package cli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"runtime/debug"
	"strings"

	"github.com/spf13/pflag"

	"github.com/sandbox-run/sandbox-run/pathguard"
	"github.com/sandbox-run/sandbox-run/policy"
	"github.com/sandbox-run/sandbox-run/report"
	"github.com/sandbox-run/sandbox-run/sandbox"
)

// Exit statuses of sandbox-run run, beyond the command's own.
const (
	ExitTimeout       = sandbox.ExitTimeout // --timeout ended the run
	ExitRefused       = sandbox.ExitSetup   // sandbox-run refused or could not set up
	ExitNotExecutable = sandbox.ExitNotExecutable
	ExitNotFound      = sandbox.ExitNotFound
)

// Version is set at build time with -ldflags "-X ...cli.Version=...".
var Version = "dev"

// InitBuildID is the Go build ID of the sandbox-run-init that make build
// puts next to this binary, stamped with -ldflags "-X
// ...cli.InitBuildID=..."; empty (go build, go install) means there is
// none and this binary is its own init (see sandbox.InitBinary).
var InitBuildID string

// IO is where a run reads and writes; the command gets these descriptors
// themselves.
type IO struct {
	Stdin, Stdout, Stderr *os.File
	// ScrubArgv says args are the process's own argv (os.Args[1:]), whose
	// --env values Run may overwrite once parsed. Never set it for strings
	// of other origin: they may be read-only memory.
	ScrubArgv bool
}

// Run executes sandbox-run with args (without the program name) and returns
// the process's exit status. sigs, when set, carries the signals to relay
// to a running command. The hidden modes are not its: main dispatches
// them first (internal/reexec).
func Run(ctx context.Context, args []string, stdio IO, sigs <-chan os.Signal) int {
	if len(args) == 0 {
		usage(stdio.Stderr)
		return 2
	}
	switch args[0] {
	case "run":
		return runCmd(ctx, args[1:], stdio, sigs)
	case "proxy":
		return proxyCmd(ctx, args[1:], stdio, sigs)
	case "check":
		return checkCmd(ctx, args[1:], stdio)
	case "setup":
		return setupCmd(ctx, args[1:], stdio)
	case "mcp":
		return mcpCmd(ctx, args[1:], stdio, sigs)
	case "pin":
		return pinCmd(ctx, args[1:], stdio, sigs)
	case "wrap":
		return wrapCmd(ctx, args[1:], stdio)
	case "hook":
		return hookCmd(ctx, args[1:], stdio)
	case "import":
		return importCmd(args[1:], stdio)
	case "presets":
		return presetsCmd(args[1:], stdio)
	case "schema":
		return schemaCmd(args[1:], stdio)
	case "version", "--version":
		fmt.Fprintf(stdio.Stdout, "sandbox-run %s\n", version())
		return 0
	case "help", "--help", "-h":
		usage(stdio.Stdout)
		return 0
	}
	return fail(stdio.Stderr, fmt.Errorf("unknown subcommand %q; fix: use run, mcp, pin, wrap, hook, proxy, check, setup, import, presets, schema or version (sandbox-run help)", args[0]))
}

// version is Version as stamped at build time (make build, make install);
// without a stamp, the module version that go install
// .../cmd/sandbox-run@VERSION records in the binary; else "dev".
func version() string {
	if Version != "dev" {
		return Version
	}
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return Version
	}
	if bi.Main.Version != "" && bi.Main.Version != "(devel)" {
		return bi.Main.Version
	}
	// Built in a checkout (go build, go install ./cmd/sandbox-run): the
	// commit the go command recorded.
	rev, dirty := "", ""
	for _, s := range bi.Settings {
		switch {
		case s.Key == "vcs.revision" && len(s.Value) >= 7:
			rev = s.Value[:7]
		case s.Key == "vcs.modified" && s.Value == "true":
			dirty = "-dirty"
		}
	}
	if rev != "" {
		return Version + "-" + rev + dirty
	}
	return Version
}

func usage(w io.Writer) {
	fmt.Fprint(w, `usage:
  sandbox-run run [flags] -- COMMAND [ARG...]   run COMMAND in a sandbox
  sandbox-run check [--json]                    what holds on this machine, and the tier
  sandbox-run proxy --listen PATH [flags]       a node-wide egress proxy on a Unix socket
  sandbox-run mcp [flags] -- SERVER [ARG...]    MCP relay in front of a sandboxed server
  sandbox-run pin save|diff [flags] -- SERVER   write a pin of what SERVER shows, or diff it with --pin-from FILE
  sandbox-run wrap [--dry-run|--undo] [CONFIG]  run an MCP client's stdio servers through sandbox-run mcp
  sandbox-run hook claude-code|gemini           an agent's pre-tool hook: its shell commands run inside
  sandbox-run setup [--dry-run]                 as root on Ubuntu 24.04+: load Ubuntu's bwrap AppArmor profile
  sandbox-run import srt|claude FILE            print the profile equivalent to srt's or Claude Code's sandbox settings
  sandbox-run presets                           what each --preset allows
  sandbox-run schema                            the profile's JSON Schema
  sandbox-run version
Run "sandbox-run run --help" for the run flags.
`)
}

// fail prints one line and returns ExitRefused.
func fail(w io.Writer, err error) int {
	msg := strings.ReplaceAll(err.Error(), "\n", " ")
	fmt.Fprintf(w, "sandbox-run: %s\n", msg)
	return ExitRefused
}

type runFlags struct {
	fs                          *pflag.FlagSet
	walks                       *pathguard.Resolver // the invocation's memo of path walks; nil: none
	workdir                     string
	write, read, protect, env   []string
	passEnv, allowHost, llmEnv  []string
	egressSocket, llmSocket     string
	ptrace, mapOwner            bool
	mode                        string
	config, report, audit       string
	timeout, cpuTime            string
	memory, pids, nofile, fsize string
	tmpSize, user, bwrapPath    string
	runscPath                   string
	shmSize                     string
	cgroupBase                  string
	home, session               string
	caches                      []string
	settings                    string   // --settings: srt's or Claude Code's settings file
	presets                     []string // --preset
	secrets                     []string
	secretIn, llmKeyEnv         string
	allowHTTP                   []string // --allow-http rules
	upstreamCA                  string
	dryRun, summary, verbose    bool
	tty, noTTY                  bool
	devEnv                      bool
	refusalCode                 int
	handIn                      handInFlags
	image                       imageFlags
}

func newRunFlags() *runFlags {
	f := &runFlags{fs: pflag.NewFlagSet("run", pflag.ContinueOnError)}
	fs := f.fs
	fs.SortFlags = false
	// The first word that is not a flag ends ours: a command's own flags
	// must never be taken as sandbox-run's.
	fs.SetInterspersed(false)
	fs.StringVar(&f.workdir, "workdir", "", "writable directory, same path inside, the current directory (default: cwd)")
	fs.StringArrayVar(&f.write, "write", nil, "another writable directory (repeatable)")
	fs.StringArrayVar(&f.read, "read", nil, "another read-only path (repeatable)")
	fs.StringArrayVar(&f.protect, "protect", nil, "another path kept read-only inside every writable directory (repeatable)")
	fs.StringArrayVar(&f.env, "env", nil, "KEY=VALUE for the command (repeatable); nothing else is passed")
	fs.StringArrayVar(&f.passEnv, "pass-env", nil, "copy this variable from sandbox-run's environment (repeatable)")
	fs.StringArrayVar(&f.allowHost, "allow-host", nil, "egress allow-list entry: host, *.domain, host:port, IP (repeatable)")
	fs.StringArrayVar(&f.allowHTTP, "allow-http", nil, "'METHODS HOST[:PORT]/PATH-GLOB': terminate TLS to HOST and allow only matching requests (repeatable; docs/tls.md)")
	fs.StringVar(&f.upstreamCA, "upstream-ca", "", "PEM file of the CAs that verify the hosts sandbox-run terminates (--allow-http, --secret, --llm-key-env; default: the system roots)")
	fs.StringVar(&f.home, "home", "", "an existing directory that becomes $HOME, writable (default: the private /tmp, never the workdir)")
	fs.StringVar(&f.session, "session", "", "a named home kept in sandbox-run's data dir that persists between runs of this session")
	fs.StringArrayVar(&f.caches, "cache", nil, "share this toolchain cache between your runs: npm, pip, go, cargo, uv (repeatable)")
	fs.StringArrayVar(&f.presets, "preset", nil, "allow a registry's or API's hosts: "+strings.Join(policy.PresetNames(), ", ")+" (repeatable; sandbox-run presets)")
	fs.StringVar(&f.settings, "settings", "", "srt's or Claude Code's settings file (JSON), read as those tools read it (docs/settings.md)")
	fs.StringVar(&f.egressSocket, "egress-socket", "", "node-wide egress proxy on this Unix socket")
	fs.StringVar(&f.llmSocket, "llm-socket", "", "forward a loopback port inside to this LLM proxy socket (URL in SANDBOX_LLM_URL)")
	fs.StringArrayVar(&f.llmEnv, "llm-env", nil, "another variable that gets the LLM channel's URL, e.g. ANTHROPIC_BASE_URL (repeatable)")
	f.handIn.register(fs)
	fs.StringArrayVar(&f.secrets, "secret", nil, "NAME@HOST[,HOST...]: $NAME inside is a placeholder the proxy swaps for the caller's $NAME only over TLS to HOST; NAME=file:PATH@HOST reads it from a file (repeatable)")
	fs.StringVar(&f.secretIn, "secret-in", "", "body: also swap secrets in request bodies (headers and query strings always)")
	fs.StringVar(&f.llmKeyEnv, "llm-key-env", "", "the caller's variable holding the LLM provider key, added outside; inside it holds a placeholder")
	fs.BoolVar(&f.ptrace, "ptrace", false, "allow ptrace (refused unless kernel.yama.ptrace_scope >= 1)")
	fs.BoolVar(&f.mapOwner, "map-owner", false, "as root: write the workdir as its owner through an idmapped mount; the command still runs as --user's uid")
	fs.StringVar(&f.mode, "sandbox", "auto", "auto | bwrap | gvisor (tier 2, explicit) | landlock (Linux without user namespaces, with named losses) | seatbelt | off (tier 0, explicit)")
	fs.StringVar(&f.config, "config", "", "profile file (JSON); flags override it")
	fs.StringVar(&f.report, "report", "", "write the isolation report (JSON) to this file")
	fs.StringVar(&f.audit, "audit", "", "append network decisions and run events (JSON lines)")
	fs.StringVar(&f.timeout, "timeout", "", "end the whole sandbox after this long, e.g. 90s, 10m (exit 124)")
	fs.StringVar(&f.memory, "memory", "", "memory limit for the whole sandbox, e.g. 512M (K, M, G, T or KiB, MiB, GiB, TiB: powers of 1024; KB, MB, GB refused); default half the host's memory; none for no ceiling")
	fs.StringVar(&f.pids, "pids", "", fmt.Sprintf("task (process and thread) limit for the whole sandbox (default %d on Linux)", policy.DefaultPids))
	fs.StringVar(&f.cpuTime, "cpu-time", "", "CPU time limit for the whole sandbox, e.g. 30s")
	fs.StringVar(&f.nofile, "nofile", "", "open file limit per process")
	fs.StringVar(&f.fsize, "fsize", "", "largest file a process may write, e.g. 1G (same units as --memory)")
	fs.StringVar(&f.cgroupBase, "cgroup-base", "", "delegated cgroup v2 directory for the run's cgroup (default: find one)")
	fs.StringVar(&f.tmpSize, "tmp-size", "", "size of the private /tmp (default 256M)")
	fs.StringVar(&f.shmSize, "shm-size", "", "size of the private /dev/shm (default 64M)")
	fs.StringVar(&f.user, "user", "", "UID[:GID] the sandbox runs as when sandbox-run is root (default 65534)")
	fs.StringVar(&f.bwrapPath, "bwrap", "", "bubblewrap binary (default: bwrap on PATH)")
	fs.StringVar(&f.runscPath, "runsc", "", "gVisor's runsc for --sandbox gvisor (default: runsc on PATH)")
	f.image.register(fs)
	fs.BoolVar(&f.tty, "tty", false, "give the command a terminal of its own (default when stdin and stdout are terminals)")
	fs.BoolVar(&f.noTTY, "no-tty", false, "never give the command a terminal; it gets stdin, stdout and stderr as they are")
	fs.BoolVar(&f.dryRun, "dry-run", false, "print the bwrap call and its argument stream (values redacted); run nothing")
	fs.BoolVar(&f.summary, "summary", false, "print a short isolation summary on stderr after the run")
	fs.BoolVar(&f.verbose, "verbose", false, "print a one-line isolation summary on stderr after the run, and each refusal as it happens")
	fs.IntVar(&f.refusalCode, "exit-code-refusal", ExitRefused, "exit with this status (1-255) instead of 125 when sandbox-run itself refuses or fails, so a command's own 125 stays apart")
	fs.BoolVar(&f.devEnv, "dev-env", true, "carry your git identity (user.name, user.email, init.defaultBranch) and toolchain directories in; --dev-env=false for neither")
	strict(fs, runNonEmpty...)
	return f
}

// commandArgs returns the command after the flags. The first word that is
// not a flag ends sandbox-run's flags, "--" or not (the flag set is not
// interspersed), so a harness that strips the "--" (the MCP Inspector
// does) starts the same command. A "--" right before the command, or
// several, as a harness that adds its own leaves them, are dropped: no
// program is named "--".
func commandArgs(fs *pflag.FlagSet) []string {
	cmd := fs.Args()
	for len(cmd) > 0 && cmd[0] == "--" {
		cmd = cmd[1:]
	}
	return cmd
}

// runNonEmpty are the run flags whose value may not be empty: an empty path
// would silently mean the current directory.
var runNonEmpty = []string{"workdir", "settings", "home", "session", "egress-socket", "llm-socket", "config", "report", "audit",
	"cgroup-base", "bwrap", "runsc", "image", "podman", "user", "tmp-size", "shm-size", "memory", "pids", "nofile", "fsize", "sandbox", "timeout", "cpu-time"}

// absPath checks the path given to --flag and makes it absolute against
// the current directory.
func absPath(flag, p string) (string, error) {
	if err := policy.CheckPath("--"+flag, p); err != nil {
		return "", err
	}
	a, err := filepath.Abs(p)
	if err != nil {
		return "", fmt.Errorf("--%s %q: %w; fix: pass an absolute path", flag, p, err)
	}
	return a, nil
}

// maxID is the largest uid or gid the kernel accepts: (uid_t)-1 means "no
// change" to setresuid.
const maxID int64 = 1<<32 - 2

func parseUser(s string) (int, int, error) {
	us, gs, hasG := strings.Cut(s, ":")
	var uid, gid int
	if _, err := fmt.Sscanf(us, "%d", &uid); err != nil || uid <= 0 || int64(uid) > maxID || fmt.Sprint(uid) != us {
		return 0, 0, fmt.Errorf("--user %q: want UID[:GID], numeric ids from 1 to %d; fix: pass e.g. --user 65534", s, maxID)
	}
	gid = uid
	if hasG {
		if _, err := fmt.Sscanf(gs, "%d", &gid); err != nil || gid <= 0 || int64(gid) > maxID || fmt.Sprint(gid) != gs {
			return 0, 0, fmt.Errorf("--user %q: want UID[:GID], numeric ids from 1 to %d; fix: pass e.g. --user 65534:65534", s, maxID)
		}
	}
	return uid, gid, nil
}

func redactKV(kv string) string {
	if k, _, ok := strings.Cut(kv, "="); ok {
		return k + "=<redacted>"
	}
	return "<redacted>"
}

// runCmd is `sandbox-run run [flags] -- COMMAND [ARG...]`.
func runCmd(ctx context.Context, args []string, stdio IO, sigs <-chan os.Signal) int {
	f := newRunFlags()
	var terminal *os.File
	pr, code, done := f.prepare(args, stdio, sigs, subcommand{
		name:  "run",
		usage: "usage: sandbox-run run [flags] -- COMMAND [ARG...]\n",
		noCmd: "no command; fix: sandbox-run run [flags] -- COMMAND [ARG...]",
		check: func() (err error) {
			if err := f.checkRefusalCode(); err != nil {
				return err
			}
			terminal, err = f.terminal(stdio)
			return err
		},
	})
	if done {
		return f.own(code)
	}
	if pr.audit != nil {
		defer pr.audit.Close()
	}
	opts := pr.opts
	opts.Stdin, opts.Stdout, opts.Terminal = stdio.Stdin, stdio.Stdout, terminal
	if f.dryRun {
		opts.DryRun = stdio.Stdout
	}
	opts.Refusals = newRefusals(f.verbose, stdio.Stderr)
	if pr.p.Sandbox == policy.ModeOff && !f.dryRun {
		fmt.Fprintln(stdio.Stderr, "sandbox-run: warning: tier 0 (--sandbox off): no sandbox; the command has your files, network and rights, and only its environment is cleared")
	}
	printOutsideRepos(stdio.Stderr, pr.p)
	res, err := sandbox.Run(ctx, pr.p, pr.cmd, opts)
	if code, done := runOutcome(stdio, pr.audit, res, err); done {
		return f.own(code)
	}
	if code := f.writeReportFile(stdio.Stderr, res.Report, res.ExitCode); code != res.ExitCode {
		return f.own(code)
	}
	printOffline(stdio.Stderr, pr.cmd, res)
	printRefused(stdio.Stderr, res.Report)
	if f.summary {
		printSummary(stdio.Stderr, res)
	} else {
		printFull(stdio.Stderr, res.Report)
	}
	if f.verbose {
		printOneLine(stdio.Stderr, res)
	}
	return f.exitOf(res)
}

// terminal says which terminal the command gets (nil: none) from --tty,
// --no-tty and whether stdin and stdout are terminals, and refuses the
// combinations that cannot be honoured.
func (f *runFlags) terminal(stdio IO) (*os.File, error) {
	switch {
	case f.tty && f.noTTY:
		return nil, errors.New("--tty and --no-tty contradict each other; fix: pass one of them")
	case f.tty && !ttySupported:
		return nil, errors.New("--tty: a terminal for the command is made only on Linux so far; fix: leave out --tty")
	case f.tty && !isTerminal(stdio.Stdin):
		return nil, errors.New("--tty: stdin is not a terminal, so there are no keys to relay; fix: run from a terminal, or leave out --tty")
	case f.tty, !f.noTTY && !f.dryRun && isTerminal(stdio.Stdin) && isTerminal(stdio.Stdout):
		return stdio.Stdin, nil
	}
	return nil, nil
}

// runOutcome prints what sandbox.Run's error and the report's exit say
// about the run. done says the invocation ends here with code (the
// command never ran); otherwise res holds the command's status and report.
func runOutcome(stdio IO, af *auditFile, res *sandbox.Result, err error) (code int, done bool) {
	var ee *sandbox.ExecError
	switch {
	case errors.As(err, &ee):
		fmt.Fprintf(stdio.Stderr, "sandbox-run: %s\n", ee.Error())
	case errors.Is(err, sandbox.ErrTimeout):
		// Run's timer ended the set-up: the command never ran.
		af.discard()
		fmt.Fprintf(stdio.Stderr, "sandbox-run: %s; fix: raise --timeout\n", err.Error())
		return ExitTimeout, true
	case err != nil:
		af.discard()
		return failClient(stdio, err), true
	case res.Report.Exit != nil && res.Report.Exit.Reason != "" && res.Report.Exit.Class != report.ClassCancelled:
		// sandbox-run ended it: a limit, the timeout, bwrap killed.
		fmt.Fprintf(stdio.Stderr, "sandbox-run: %s\n", res.Report.Exit.Reason)
	}
	return 0, false
}

// checkWorkdir says in plain words why the workdir cannot be used.
func checkWorkdir(rv *pathguard.Resolver, wd string) error {
	var fi fs.FileInfo
	var err error
	if filepath.IsAbs(wd) && filepath.Clean(wd) == wd {
		fi, err = rv.Stat(wd) // the walk of the workdir, in the memo
	} else {
		fi, err = os.Stat(wd)
	}
	switch {
	case errors.Is(err, os.ErrNotExist):
		return fmt.Errorf("workdir %s does not exist; fix: create it (mkdir -p %s) or pass --workdir DIR", wd, wd)
	case err != nil:
		return fmt.Errorf("workdir %s cannot be inspected: %v; fix: pass --workdir DIR, a directory you can reach", wd, errors.Unwrap(err))
	case !fi.IsDir():
		return fmt.Errorf("workdir %s is not a directory; fix: pass --workdir %s, the directory that holds it, or another directory", wd, filepath.Dir(wd))
	}
	return nil
}

// warnMissingEnv says on w which --pass-env names are not set in
// sandbox-run's own environment: the run goes on without them, and a
// command that needed one should not fail mysteriously.
func warnMissingEnv(w io.Writer, p policy.Policy) {
	for _, k := range p.MissingPassEnv(os.LookupEnv) {
		fmt.Fprintf(w, "sandbox-run: warning: --pass-env %s: not set in sandbox-run's environment; the command runs without it\n", k)
	}
}

// auditFile is an --audit file opened before the run. One this run
// created is removed again when the run is refused, so that a refusal
// leaves nothing behind.
type auditFile struct {
	*os.File
	created bool
}

func openAudit(path string) (*auditFile, error) {
	_, err := os.Lstat(path)
	created := errors.Is(err, os.ErrNotExist)
	// No link is followed, in any component: the file and every directory
	// on its way are taken as they are (pathguard.OpenFile).
	f, err := pathguard.OpenFile(path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("--audit %s: %v; fix: name a regular file by its real path, outside every --workdir and --write dir", path, err)
	}
	return &auditFile{File: f, created: created}, nil
}

// discard removes the file if this run created it and nothing was written.
// A nil a does nothing.
func (a *auditFile) discard() {
	if a == nil || !a.created {
		return
	}
	pathguard.RemoveIfSame(a.Name(), a.File)
}

func writeReport(path string, r report.Report) error {
	b, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return err
	}
	// A new file renamed over path, in its directory pinned without
	// following links: whatever the path became during the run, nothing
	// is written through a link.
	return pathguard.WriteFile(path, append(b, '\n'), 0o644)
}

func printSummary(w io.Writer, res *sandbox.Result) {
	r := res.Report
	fmt.Fprintf(w, "isolation: tier %d (%s on %s), exit %d%s\n", r.Tier, r.Mechanism, r.Platform, res.ExitCode, exitWhose(r.Exit))
	if r.Bwrap != nil {
		fmt.Fprintf(w, "  bwrap        %s %s\n", r.Bwrap.Path, r.Bwrap.Version)
		for _, a := range r.Bwrap.Advisories {
			fmt.Fprintf(w, "  advisory     %s: %s\n", a.ID, a.Fix)
		}
	}
	if r.Gvisor != nil {
		fmt.Fprintf(w, "  runsc        %s %s (platform %s)\n", r.Gvisor.Path, r.Gvisor.Version, r.Gvisor.Platform)
	}
	if len(r.Namespaces) > 0 {
		fmt.Fprintf(w, "  namespaces   %s\n", strings.Join(r.Namespaces, ", "))
	}
	fmt.Fprintf(w, "  host uid     %d\n", r.HostUID)
	fmt.Fprintf(w, "  writable     %s\n", strings.Join(r.Writable, ", "))
	if len(r.ReadOnly) > 0 {
		fmt.Fprintf(w, "  read-only    %s\n", strings.Join(r.ReadOnly, ", "))
	}
	fmt.Fprintf(w, "  protected    %d paths held read-only, %d missing (quarantined if created)\n", len(r.Protected), len(r.Watched))
	if len(r.Copied) > 0 {
		fmt.Fprintf(w, "               %d existing not held, writable during the run (put back from a copy after it)\n", len(r.Copied))
	}
	if r.ProtectWalk != nil && !r.ProtectWalk.Complete {
		fmt.Fprintf(w, "  git walk     incomplete: %d skipped (see the report's protect_walk)\n", len(r.ProtectWalk.Skipped))
	}
	if r.Sweep != nil && !r.Sweep.Complete {
		fmt.Fprintf(w, "  git sweep    incomplete: %d skipped, repositories past it not neutralised (see the report's sweep)\n", len(r.Sweep.Skipped))
	}
	fmt.Fprintf(w, "  network      %s\n", r.Network)
	if e := r.Egress; e != nil {
		fmt.Fprintf(w, "  egress       %d allowed, %d refused; %d bytes out, %d in\n", e.Allowed, e.Refused, e.BytesOut, e.BytesIn)
	}
	fmt.Fprintf(w, "  environment  %s\n", strings.Join(r.EnvNames, " "))
	printDeveloper(w, r.Developer)
	if rb := r.Readback; rb != nil {
		fmt.Fprintf(w, "  read back    uid %d, NoNewPrivs %d, Seccomp %d, CapEff %s\n", rb.UID, rb.NoNewPrivs, rb.Seccomp, rb.CapEff)
	}
	if sc := r.Seccomp; sc != nil {
		fmt.Fprintf(w, "  seccomp      %s filter %s (ptrace allowed: %v)\n", sc.Arch, sc.Digest[:19], sc.Ptrace)
	}
	if ll := r.Landlock; ll != nil {
		fmt.Fprintf(w, "  landlock     ABI %d (kernel %d), TCP by port %v, signals scoped %v, read back: NoNewPrivs %d, / denied %v\n",
			ll.ABI, ll.KernelABI, ll.NetworkByPort, ll.Scoped, ll.ReadbackNoNewPrivs, ll.ReadbackRootDenied)
	}
	for _, l := range r.Losses {
		fmt.Fprintf(w, "  loss         %s: %s\n", l.Name, l.Detail)
	}
	for _, n := range r.Notes {
		fmt.Fprintf(w, "  note         %s\n", n)
	}
}

// printFull says which writable directories ended on a full file system:
// the command's ENOSPC is then the disk's doing, not the sandbox's.
func printFull(w io.Writer, r report.Report) {
	for _, d := range r.FullFilesystems {
		fmt.Fprintf(w, "sandbox-run: note: the file system of %s is full: writes there failed with ENOSPC (No space left on device)\n", d)
	}
}

// cacheDir is where sandbox-run keeps what it learnt about bwrap binaries;
// "" (no cache) when the user has no cache directory.
func cacheDir() string {
	d, err := os.UserCacheDir()
	if err != nil {
		return ""
	}
	return filepath.Join(d, "sandbox-run")
}

// initBinary is sandbox-run-init beside this binary, as InitBuildID
// stamps it; the zero InitBinary when nothing is stamped.
func initBinary() sandbox.InitBinary {
	if InitBuildID == "" {
		return sandbox.InitBinary{}
	}
	// Found beside this executable only when a run needs an init.
	return sandbox.InitBinary{Beside: "sandbox-run-init", BuildID: InitBuildID}
}

// dataDir is where sandbox-run keeps sessions' homes and shared caches:
// $XDG_DATA_HOME/sandbox-run, else ~/.local/share/sandbox-run; "" when
// neither is known. As root it is /var/lib/sandbox-run: the sandbox runs
// as another uid, which must be able to reach them, and /root is closed.
func dataDir() string {
	if os.Geteuid() == 0 {
		return "/var/lib/sandbox-run"
	}
	if d := os.Getenv("XDG_DATA_HOME"); filepath.IsAbs(d) {
		return filepath.Join(d, "sandbox-run")
	}
	if h, err := os.UserHomeDir(); err == nil && filepath.IsAbs(h) {
		return filepath.Join(h, ".local", "share", "sandbox-run")
	}
	return ""
}

func printOneLine(w io.Writer, res *sandbox.Result) {
	r := res.Report
	held, verified := 0, 0
	for _, p := range r.Protections {
		if p.Configured {
			held++
			if p.Verified != nil && *p.Verified {
				verified++
			}
		}
	}
	class := ""
	if r.Exit != nil {
		class = " (" + string(r.Exit.Class) + ")"
	}
	fmt.Fprintf(w, "sandbox-run: run %s: tier %d %s, %d protections configured, %d verified from inside, network %s, exit %d%s, %s\n",
		r.RunID, r.Tier, r.Mechanism, held, verified, r.Network, res.ExitCode, class, r.EnvironmentDigest)
}
