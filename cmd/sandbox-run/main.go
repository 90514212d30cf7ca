// Command sandbox-run runs MCP tool servers and agent shells in a sandbox.
// See the README and sandbox-run help.
package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"

	"github.com/sandbox-run/sandbox-run/internal/cli"
	"github.com/sandbox-run/sandbox-run/internal/reexec"
)

func main() {
	// The hidden modes (the init inside the sandbox, the exec shims, the
	// matrix's probes) first: they set up their own signal handling.
	if code, ok := reexec.Main(os.Args[1:]); ok {
		os.Exit(code)
	}
	// Signals are relayed to the sandboxed command, not acted on here.
	sigs := make(chan os.Signal, 8)
	signal.Notify(sigs, syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP)
	os.Exit(cli.Run(context.Background(), os.Args[1:], cli.IO{Stdin: os.Stdin, Stdout: os.Stdout, Stderr: os.Stderr, ScrubArgv: true}, sigs))
}
