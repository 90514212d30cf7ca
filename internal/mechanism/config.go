package mechanism

import (
	"context"
	"io"
	"os"

	"github.com/sandbox-run/sandbox-run/internal/ociimage"
	"github.com/sandbox-run/sandbox-run/internal/protect"
	"github.com/sandbox-run/sandbox-run/internal/refusals"
	"github.com/sandbox-run/sandbox-run/pathguard"
)

// Config is what the skeleton hands a mechanism besides the policy and
// the command: the caller's streams and hooks, and how to run (which
// binaries, where state is kept). It is package sandbox's Options as the
// mechanisms read them; each field means what the Options field of the
// same name means. A mechanism ignores what does not apply to it.
type Config struct {
	Caller
	// BwrapPath and RunscPath name the binaries; empty: the first on PATH.
	BwrapPath, RunscPath string
	// BwrapCache is the private directory of what was learnt about the
	// binaries and of the run journals; empty keeps nothing.
	BwrapCache string
	// DataDir keeps sessions' homes and the shared caches; empty refuses
	// both.
	DataDir string
	// Terminal, when set, is the caller's terminal: the command gets a
	// pseudo-terminal of its own (bwrap only).
	Terminal *os.File
	// DryRun, when set, receives the command line and nothing runs.
	DryRun io.Writer
	// Refusals, when set, is told of everything the run refused.
	Refusals *refusals.Collector
	// ProcSys is where kernel settings are read; empty means /proc/sys.
	ProcSys string
	// Init names the dedicated init binary (see InitBinary).
	Init InitBinary
	// MapOwner lends the workdir's owner to the sandbox's uid (bwrap, as
	// root, only).
	MapOwner bool
	// Image, when set, resolves the run's container image (--image); nil:
	// the run has none. It is called once, by Prepare, so that the image
	// is looked up after the mechanism's own binary is found.
	Image func(context.Context) (*ociimage.Image, error)
	// Resolver is the memo of the plan's path walks; never nil when the
	// skeleton hands it over.
	Resolver *pathguard.Resolver
	// Protect tunes the protection of the writable directories for tests;
	// the zero value is what every run has.
	Protect protect.Hooks
}

// InitBinary names sandbox-run-init, which bwrap starts as the sandbox's
// init in place of sandbox-run itself when it carries BuildID; package
// sandbox's InitBinary says when it is used. The zero value: sandbox-run
// is init.
type InitBinary struct {
	Path    string
	BuildID string
	// Beside, when Path is empty, names the file in this executable's
	// directory that Path is.
	Beside string
}
