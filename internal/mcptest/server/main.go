// Command server is the mcptest MCP server on stdio, for tests: go build
// it and run it inside a sandbox. See package mcptest for its tools. With
// the first argument "hostile" it is mcptest.ServeHostile instead.
package main

import (
	"fmt"
	"os"

	"github.com/mark3labs/mcp-go/server"

	"github.com/sandbox-run/sandbox-run/internal/mcptest"
)

func main() {
	if len(os.Args) > 1 && os.Args[1] == mcptest.HostileArg {
		if err := mcptest.ServeHostile(os.Stdin, os.Stdout); err != nil {
			fmt.Fprintln(os.Stderr, "mcptest hostile server:", err)
			os.Exit(1)
		}
		return
	}
	if err := server.ServeStdio(mcptest.NewServerOpts(mcptest.ServerOpts{
		Instructions: os.Getenv("MCPTEST_INSTRUCTIONS"), EchoUI: os.Getenv("MCPTEST_ECHO_UI")})); err != nil {
		fmt.Fprintln(os.Stderr, "mcptest server:", err)
		os.Exit(1)
	}
}
