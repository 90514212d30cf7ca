package hostnet

import (
	"context"

	"github.com/sandbox-run/sandbox-run/internal/fault"
	"github.com/sandbox-run/sandbox-run/policy"
	"github.com/sandbox-run/sandbox-run/report"
)

// Network and Loopback are the Unix networks; Windows has neither.
type (
	Network struct {
		HandIn *report.HandInReport // always nil here
	}
	Loopback struct{}
)

// Close does nothing: there is no Network here.
func (*Network) Close() {}

// Counts is nil: there is no Network here.
func (*Network) Counts() *report.EgressCounts { return nil }

// Close does nothing: there is no Loopback here.
func (*Loopback) Close() {}

// Counts is nil: there is no Loopback here.
func (*Loopback) Counts() *report.EgressCounts { return nil }

func startSockets(context.Context, policy.Policy, Request, Run) (*Network, error) {
	return nil, fault.New("a network", "sandbox-run has none on Windows", "run on Linux or macOS")
}

func startLoopback(context.Context, policy.Policy, Request, Run) (*Loopback, error) {
	return nil, fault.New("a network", "sandbox-run has none on Windows", "run on Linux or macOS")
}
