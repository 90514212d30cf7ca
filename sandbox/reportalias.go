package sandbox

import (
	"github.com/sandbox-run/sandbox-run/internal/mechanism"
	"github.com/sandbox-run/sandbox-run/report"
)

// The report's types are package report's (the contract a harness reads);
// these names keep sandbox.Report and its parts for callers of Run.

type (
	DeveloperReport = report.DeveloperReport
	Transparent     = report.Transparent
	HandInReport    = report.HandInReport
	SocketHandIn    = report.SocketHandIn
	PublishedReport = report.PublishedReport
	ImageReport     = report.ImageReport
	WalkReport      = report.WalkReport
	Quarantined     = report.Quarantined
	LiveGuardReport = report.LiveGuardReport
	Protection      = report.Protection
	Exit            = report.Exit
	ExitClass       = report.ExitClass
	TmpfsReport     = report.TmpfsReport
	ReadScanReport  = report.ReadScanReport
	Limit           = report.Limit
	Report          = report.Report
	Readback        = report.Readback
	Kernel          = report.Kernel
	LandlockReport  = report.LandlockReport
	Loss            = report.Loss
	EgressCounts    = report.EgressCounts
	BwrapReport     = report.BwrapReport
	GvisorReport    = report.GvisorReport
	Advisory        = report.Advisory
	SeccompReport   = report.SeccompReport
	SecretReport    = report.SecretReport
	TLSReport       = report.TLSReport
)

const (
	ClassExited          = report.ClassExited
	ClassSignaled        = report.ClassSignaled
	ClassTimedOut        = report.ClassTimedOut
	ClassMemoryLimit     = report.ClassMemoryLimit
	ClassPidsLimit       = report.ClassPidsLimit
	ClassCPULimit        = report.ClassCPULimit
	ClassNotFound        = report.ClassNotFound
	ClassNotExecutable   = report.ClassNotExecutable
	ClassMechanismKilled = report.ClassMechanismKilled
	ClassCancelled       = report.ClassCancelled
	ClassSweepIncomplete = report.ClassSweepIncomplete
	SourceDefault        = report.SourceDefault
	SourcePolicy         = report.SourcePolicy
	ReportSchema         = report.ReportSchema
)

// A run's outcome and the error of a command that could not start are the
// mechanisms' (internal/mechanism): these names keep them for callers.
type (
	Result    = mechanism.Result
	ExecError = mechanism.ExecError
)

// ErrUnsupported means the requested mechanism does not exist on this
// platform. It matches errors.ErrUnsupported.
var ErrUnsupported = mechanism.ErrUnsupported
