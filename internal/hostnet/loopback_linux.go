package hostnet

import (
	"context"
	"log/slog"
	"net"

	"github.com/sandbox-run/sandbox-run/forwarder"
	"github.com/sandbox-run/sandbox-run/internal/llm"
)

// serveLLM relays the loopback port to the node's LLM proxy: with an
// audit, as an HTTP relay that records each request, as bwrap's does.
func serveLLM(ctx context.Context, ln net.Listener, socket string, cfg LoopbackConfig, log *slog.Logger) error {
	if cfg.Audit != nil {
		return llm.Serve(ctx, ln, socket, cfg.RunID, cfg.Audit, log, llm.Key{})
	}
	return forwarder.Serve(ctx, ln, socket)
}
