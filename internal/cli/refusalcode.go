package cli

import (
	"fmt"

	"github.com/sandbox-run/sandbox-run/report"
	"github.com/sandbox-run/sandbox-run/sandbox"
)

// checkRefusalCode refuses an --exit-code-refusal outside 1-255 (0 would
// read as success, and a status is one byte).
func (f *runFlags) checkRefusalCode() error {
	if f.refusalCode < 1 || f.refusalCode > 255 {
		return fmt.Errorf("--exit-code-refusal %d: want a status from 1 to 255; fix: e.g. --exit-code-refusal 250", f.refusalCode)
	}
	return nil
}

// own maps code, a status sandbox-run itself gives, to --exit-code-refusal
// when it is ExitRefused. Before the flag is parsed (a flag error) it is
// still 125.
func (f *runFlags) own(code int) int {
	if code == ExitRefused && f.refusalCode >= 1 && f.refusalCode <= 255 {
		return f.refusalCode
	}
	return code
}

// exitOf is a finished run's status: the command's own, or, when
// sandbox-run ended it as a failure of its own (the mechanism killed,
// the sweep incomplete), that mapped by own. A command that exits 125 by
// itself keeps 125 whatever the flag says.
func (f *runFlags) exitOf(res *sandbox.Result) int {
	if e := res.Report.Exit; e != nil && (e.Class == report.ClassMechanismKilled || e.Class == report.ClassSweepIncomplete) {
		return f.own(res.ExitCode)
	}
	return res.ExitCode
}

// exitWhose says in the summary whose status the exit is: the command's
// own (a command may exit 125 by itself), or how sandbox-run ended it.
func exitWhose(e *report.Exit) string {
	switch {
	case e == nil:
		return ""
	case e.Class == report.ClassExited:
		return " (the command's own status)"
	}
	return " (" + string(e.Class) + ")"
}
