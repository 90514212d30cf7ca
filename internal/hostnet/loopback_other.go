//go:build unix && !linux

package hostnet

import (
	"context"
	"log/slog"
	"net"

	"github.com/sandbox-run/sandbox-run/forwarder"
)

// serveLLM relays the loopback port to the node's LLM proxy byte for byte:
// the per-request audit (package llm) is Linux's so far.
func serveLLM(ctx context.Context, ln net.Listener, socket string, _ LoopbackConfig, _ *slog.Logger) error {
	return forwarder.Serve(ctx, ln, socket)
}
