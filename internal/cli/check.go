package cli

import (
	"context"
	"errors"
	"fmt"
	"io"

	"github.com/spf13/pflag"

	"github.com/sandbox-run/sandbox-run/internal/check"
)

// checkCmd is sandbox-run check [--json] [--full]: exit 0 at tier 1, 1
// below it, 2 when check itself could not run.
func checkCmd(ctx context.Context, args []string, stdio IO) int {
	fs := pflag.NewFlagSet("check", pflag.ContinueOnError)
	fs.SetOutput(io.Discard)
	asJSON := fs.Bool("json", false, "print one JSON object: the tier and one entry per check")
	full := fs.Bool("full", false, "run the whole escape matrix, not only the fast subset")
	mode := fs.String("sandbox", "", "check another mechanism than the platform's own: landlock (Linux without user namespaces) or gvisor (tier 2)")
	strict(fs)
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, pflag.ErrHelp) {
			fmt.Fprintf(stdio.Stdout, "usage: sandbox-run check [--json] [--full] [--sandbox landlock|gvisor]\n%s", fs.FlagUsages())
			return 0
		}
		fmt.Fprintf(stdio.Stderr, "sandbox-run: %v; fix: sandbox-run check [--json] [--full]\n", err)
		return 2
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stdio.Stderr, "sandbox-run: check takes no arguments; fix: sandbox-run check [--json] [--full]\n")
		return 2
	}
	if *mode != "" && *mode != "landlock" && *mode != "gvisor" {
		fmt.Fprintf(stdio.Stderr, "sandbox-run: check --sandbox %q: unknown mechanism; fix: sandbox-run check [--sandbox landlock|gvisor]\n", *mode)
		return 2
	}
	rep := check.Check(ctx, check.Options{Full: *full, Mechanism: *mode})
	var err error
	if *asJSON {
		err = rep.WriteJSON(stdio.Stdout)
	} else {
		err = rep.WriteText(stdio.Stdout)
	}
	if err != nil {
		return 2
	}
	return rep.ExitCode()
}
