package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"path/filepath"

	"github.com/spf13/pflag"

	"github.com/sandbox-run/sandbox-run/internal/apparmor"
)

// setupCmd is sandbox-run setup [--dry-run]: on Ubuntu 24.04 or later
// with the AppArmor user-namespace restriction on, install and load
// Ubuntu's own bwrap-userns-restrict profile. Exit 0 when done or nothing
// was to be done, 125 when refused or failed.
func setupCmd(ctx context.Context, args []string, stdio IO) int {
	fs := pflag.NewFlagSet("setup", pflag.ContinueOnError)
	fs.SetOutput(io.Discard)
	dryRun := fs.Bool("dry-run", false, "print every file setup would write and every command it would run; change nothing (needs no root)")
	// --root is for tests only (hidden, documented in the README as
	// such): the tree setup reads and writes, a fake root with a fake
	// apparmor_parser in it.
	root := fs.String("root", "/", "")
	fs.MarkHidden("root")
	strict(fs)
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, pflag.ErrHelp) {
			fmt.Fprintf(stdio.Stdout, "usage: sandbox-run setup [--dry-run]\n"+
				"On Ubuntu 24.04 or later with kernel.apparmor_restrict_unprivileged_userns=1 (as root):\n"+
				"install and load Ubuntu's own bwrap-userns-restrict AppArmor profile.\n%s", fs.FlagUsages())
			return 0
		}
		return fail(stdio.Stderr, fmt.Errorf("setup: %v; fix: sandbox-run setup [--dry-run]", err))
	}
	if fs.NArg() > 0 {
		return fail(stdio.Stderr, fmt.Errorf("setup takes no arguments (got %q); fix: sandbox-run setup [--dry-run]", fs.Arg(0)))
	}
	if !filepath.IsAbs(*root) || filepath.Clean(*root) != *root {
		return fail(stdio.Stderr, fmt.Errorf("setup --root %q: not a clean absolute path; fix: leave out --root (it is for tests)", *root))
	}
	plan, err := apparmor.Decide(*root, apparmor.ReadHost(*root), *dryRun)
	if err != nil {
		return fail(stdio.Stderr, err)
	}
	for _, f := range plan.Facts {
		fmt.Fprintln(stdio.Stdout, "sandbox-run setup: "+f)
	}
	switch {
	case len(plan.Steps) == 0:
		fmt.Fprintln(stdio.Stdout, "sandbox-run setup: nothing to do: nothing written, nothing run")
		return 0
	case *dryRun:
		for _, s := range plan.Steps {
			fmt.Fprintln(stdio.Stdout, "would "+s.String())
		}
		fmt.Fprintln(stdio.Stdout, "sandbox-run setup: dry run: nothing written, nothing run")
		return 0
	}
	done, err := apparmor.Apply(ctx, *root, plan, apparmor.ExecRunner)
	for _, d := range done {
		fmt.Fprintln(stdio.Stdout, d)
	}
	if err != nil {
		return fail(stdio.Stderr, err)
	}
	return 0
}
