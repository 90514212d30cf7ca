// Command server is the mcptest MCP server on stdio, for tests: go build
// it and run it inside a sandbox. See package mcptest for its tools.
package main

import (
	"fmt"
	"os"

	"github.com/mark3labs/mcp-go/server"

	"github.com/sandbox-run/sandbox-run/internal/mcptest"
)

func main() {
	if err := server.ServeStdio(mcptest.NewServer()); err != nil {
		fmt.Fprintln(os.Stderr, "mcptest server:", err)
		os.Exit(1)
	}
}
