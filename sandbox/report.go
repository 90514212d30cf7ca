package sandbox

import (
	"github.com/sandbox-run/sandbox-run/internal/exitcode"
)

// The exit statuses sandbox-run itself gives (the CLI contract), from
// internal/exitcode's one table: every other status is the command's own.
const (
	ExitSetup         = exitcode.Setup // refused or not set up (the command never ran), or the mechanism killed
	ExitNotExecutable = exitcode.NotExecutable
	ExitNotFound      = exitcode.NotFound
)
