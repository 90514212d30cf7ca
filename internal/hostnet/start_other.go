//go:build unix && !linux

package hostnet

import (
	"context"

	"github.com/sandbox-run/sandbox-run/internal/fault"
	"github.com/sandbox-run/sandbox-run/policy"
	"github.com/sandbox-run/sandbox-run/report"
)

// Network is Linux's network namespace side; elsewhere there is none.
type Network struct {
	HandIn *report.HandInReport // always nil here
}

// Close does nothing: there is no Network here.
func (*Network) Close() {}

// Counts is nil: there is no Network here.
func (*Network) Counts() *report.EgressCounts { return nil }

func startSockets(context.Context, policy.Policy, Request, Run) (*Network, error) {
	return nil, fault.New("a network namespace", "only Linux has one", "use the mechanism of this platform")
}

func startLoopback(ctx context.Context, p policy.Policy, req Request, run Run) (*Loopback, error) {
	return StartLoopback(ctx, p, LoopbackConfig{RunID: run.RunID, Audit: run.Audit, Refusals: run.Refusals, Logger: run.logger(),
		CheckSocket: req.CheckSocket, DualStack: req.DualStack, Mechanism: req.Mechanism})
}
