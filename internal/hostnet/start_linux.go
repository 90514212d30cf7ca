package hostnet

import (
	"context"

	"github.com/sandbox-run/sandbox-run/policy"
)

func startSockets(ctx context.Context, p policy.Policy, req Request, run Run) (*Network, error) {
	n, err := SetupNetwork(ctx, p, req.UID, req.GID, req.Root, run.RunID, run.Audit, run.Refusals, run.logger(), run.LookupEnv)
	if err != nil {
		return nil, err
	}
	if err := n.handIn(p, req, run); err != nil {
		n.Close()
		return nil, err
	}
	return n, nil
}

func startLoopback(ctx context.Context, p policy.Policy, req Request, run Run) (*Loopback, error) {
	check := req.CheckSocket
	if check == nil {
		check = func(flag, path, fix string) error { return CheckSocket(flag, path, req.UID, req.GID, req.Root, fix) }
	}
	return StartLoopback(ctx, p, LoopbackConfig{RunID: run.RunID, Audit: run.Audit, Refusals: run.Refusals, Logger: run.logger(),
		CheckSocket: check, DualStack: req.DualStack, Mechanism: req.Mechanism})
}
