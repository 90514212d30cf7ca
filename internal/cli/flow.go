package cli

import (
	"errors"
	"fmt"
	"io"
	"os"
	"syscall"

	"github.com/sandbox-run/sandbox-run/internal/devenv"
	"github.com/sandbox-run/sandbox-run/pathguard"
	"github.com/sandbox-run/sandbox-run/report"

	"github.com/spf13/pflag"

	"github.com/sandbox-run/sandbox-run/policy"
	"github.com/sandbox-run/sandbox-run/sandbox"
)

// subcommand is what run and mcp do differently in the flow they share
// (runFlags.prepare).
type subcommand struct {
	name  string // "run" or "mcp"
	usage string // --help's text before the flag list
	noCmd string // the refusal when no command follows the flags
	// check refuses the subcommand's own flags; it runs once the flags
	// are parsed, before the policy is built. Nil: none.
	check func() error
	// beforeAudit runs once the policy is valid and the host files are
	// checked, before the --audit file is opened. Nil: nothing.
	beforeAudit func(p policy.Policy, opts *sandbox.Options) error
}

// prepared is an invocation ready to start: its command, its valid
// policy, the sandbox options every subcommand sets, and the --audit file
// (nil without one; the caller closes it, and discards it when the run
// never started).
type prepared struct {
	cmd   []string
	p     policy.Policy
	opts  sandbox.Options
	audit *auditFile
}

// prepare is the flow run and mcp share up to the start of the sandbox:
// parse the flags, build the policy from the profile and the flags and
// validate it (Policy.Validate holds every rule on the values, for every
// mode), check the workdir and the files sandbox-run opens on the host,
// and open --audit. Every refusal of the invocation's own input happens
// here, before anything touches the host but the --audit file, which is
// created last. done says the invocation ends here with code: --help, or a
// refusal (exit 125, one line on stderr).
func (f *runFlags) prepare(args []string, stdio IO, sigs <-chan os.Signal, sc subcommand) (pr *prepared, code int, done bool) {
	f.fs.SetOutput(io.Discard)
	if err := f.fs.Parse(args); err != nil {
		if errors.Is(err, pflag.ErrHelp) {
			fmt.Fprintf(stdio.Stdout, "%s%s", sc.usage, f.fs.FlagUsages())
			return nil, 0, true
		}
		return nil, failClient(stdio, fmt.Errorf("%v; fix: %s", err, parseFix(f.fs, args, sc.name))), true
	}
	pr = &prepared{cmd: commandArgs(f.fs)}
	if len(pr.cmd) == 0 {
		return nil, failClient(stdio, errors.New(sc.noCmd)), true
	}
	if sc.check != nil {
		if err := sc.check(); err != nil {
			return nil, failClient(stdio, err), true
		}
	}
	// One memo of path walks for the workdir, devenv and the plan
	// (pathguard.Resolver).
	rv := pathguard.NewResolver()
	f.walks = rv
	// getcwd(2) gives the real path in one call; os.Getwd stats "." and
	// $PWD to keep $PWD's spelling, which realDir resolves away anyway.
	p, err := f.policy(syscall.Getwd)
	if err == nil && f.devEnv {
		devenv.Gather(rv, p, os.LookupEnv, otherUID(rv)).Apply(&p)
	}
	if err == nil {
		err = p.Validate()
	}
	if err != nil {
		return nil, failClient(stdio, err), true
	}
	pr.p = p
	if stdio.ScrubArgv {
		scrubEnvValues(args)
	}
	warnMissingEnv(stdio.Stderr, p)
	pr.opts = sandbox.Options{
		BwrapPath:  f.bwrapPath,
		RunscPath:  f.runscPath,
		BwrapCache: cacheDir(),
		DataDir:    dataDir(),
		Stderr:     stdio.Stderr,
		Signals:    sigs,
		LookupEnv:  os.LookupEnv,
		Init:       initBinary(),
		MapOwner:   f.mapOwner,
		Resolver:   rv,
	}
	if pr.opts.Image, err = f.image.source(); err != nil {
		return nil, failClient(stdio, err), true
	}
	if err := f.checkHost(pr, sc); err != nil {
		return nil, failClient(stdio, err), true
	}
	return pr, 0, false
}

// checkHost checks the workdir and the host files, runs sc.beforeAudit
// and opens --audit (not for --dry-run, which runs nothing).
func (f *runFlags) checkHost(pr *prepared, sc subcommand) error {
	if err := checkWorkdir(pr.opts.Resolver, pr.p.Workdir); err != nil {
		return err
	}
	if err := f.hostFiles(pr.p); err != nil {
		return err
	}
	if sc.beforeAudit != nil {
		if err := sc.beforeAudit(pr.p, &pr.opts); err != nil {
			return err
		}
	}
	if f.audit == "" || f.dryRun {
		return nil
	}
	af, err := openAudit(f.audit)
	if err != nil {
		return err
	}
	pr.audit = af
	pr.opts.Audit = af
	return nil
}

// writeReportFile writes the --report file, if asked for, and returns the
// exit status: code, or ExitRefused when the report was lost from a run
// that otherwise succeeded (a harness must not take a run it cannot
// account for as a success).
func (f *runFlags) writeReportFile(stderr io.Writer, r report.Report, code int) int {
	if f.report == "" {
		return code
	}
	if err := writeReport(f.report, r); err != nil {
		fmt.Fprintf(stderr, "sandbox-run: cannot write the report: %v; fix: keep the report's directory and every directory above it free of symbolic links, and the path free of anything but a regular file\n", err)
		if code == 0 {
			return ExitRefused
		}
	}
	return code
}
