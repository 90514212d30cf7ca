// Package mcptest holds what the MCP tests share: a small MCP server built
// with mcp-go whose tools exercise what a sandbox must hold (files,
// network, environment) and what a relay must survive (progress, crashes,
// floods), and the location of the real npm servers that
// scripts/install-mcp-servers.sh installs.
//
// The server is for tests only: its tools read and write any path and
// fetch any URL they are given, which is the point: the sandbox around it
// decides what they reach.
package mcptest

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"

	"github.com/sandbox-run/sandbox-run/internal/sandboxtest"
)

// Names of the Go server's features, for tests.
const (
	ServerName   = "sandbox-run-mcptest"
	ResourceURI  = "mcptest://greeting"
	ResourceText = "hello from the mcptest server"
	PromptName   = "greet"
)

// NewServer returns the test server. Its tools:
//
//	echo {text}                      the text back
//	read_file {path}                 the file's content, or a tool error
//	write_file {path, content}       writes the file, or a tool error
//	progress {steps, delay_ms}       one progress notification per step (with a progressToken)
//	crash {code}                     exits the process with code mid-call, after a line on stderr
//	flood {count, size}              count log notifications of size bytes each, then a result
//	fetch {url}                      HTTP GET through the environment's proxy settings
//	env {}                           the environment, one NAME=value per line, sorted
//
// a resource (ResourceURI) and a prompt (PromptName, argument "name").
func NewServer() *server.MCPServer { return NewServerOpts(ServerOpts{}) }

// ServerOpts vary what the test server shows a client, as a server that
// changes between two sessions would. The command (internal/mcptest/server)
// reads them from MCPTEST_INSTRUCTIONS and MCPTEST_ECHO_UI.
type ServerOpts struct {
	// Instructions are the initialize result's instructions ("": none).
	Instructions string
	// EchoUI, when set, is the echo tool's _meta.ui.resourceUri: the UI
	// an MCP App host renders for it.
	EchoUI string
}

// NewServerOpts is NewServer, varied by o.
func NewServerOpts(o ServerOpts) *server.MCPServer {
	opts := []server.ServerOption{server.WithToolCapabilities(true), server.WithResourceCapabilities(false, true),
		server.WithPromptCapabilities(true), server.WithLogging()}
	if o.Instructions != "" {
		opts = append(opts, server.WithInstructions(o.Instructions))
	}
	s := server.NewMCPServer(ServerName, "1.0.0", opts...)
	echoTool := mcp.NewTool("echo", mcp.WithDescription("echo the text back"), mcp.WithString("text", mcp.Required()))
	if o.EchoUI != "" {
		echoTool.Meta = mcp.NewMetaFromMap(map[string]any{"ui": map[string]any{"resourceUri": o.EchoUI}})
	}
	s.AddTool(echoTool, echo)
	s.AddTool(mcp.NewTool("read_file", mcp.WithDescription("read a file"),
		mcp.WithString("path", mcp.Required())), readFile)
	s.AddTool(mcp.NewTool("write_file", mcp.WithDescription("write a file"),
		mcp.WithString("path", mcp.Required()), mcp.WithString("content", mcp.Required())), writeFile)
	s.AddTool(mcp.NewTool("progress", mcp.WithDescription("report progress, then finish"),
		mcp.WithNumber("steps", mcp.DefaultNumber(3)), mcp.WithNumber("delay_ms", mcp.DefaultNumber(10))), progress)
	s.AddTool(mcp.NewTool("crash", mcp.WithDescription("exit the server mid-call"),
		mcp.WithNumber("code", mcp.DefaultNumber(3))), crash)
	s.AddTool(mcp.NewTool("flood", mcp.WithDescription("send many log notifications"),
		mcp.WithNumber("count", mcp.DefaultNumber(1000)), mcp.WithNumber("size", mcp.DefaultNumber(1024))), flood)
	s.AddTool(mcp.NewTool("fetch", mcp.WithDescription("HTTP GET a URL"),
		mcp.WithString("url", mcp.Required())), fetch)
	s.AddTool(mcp.NewTool("env", mcp.WithDescription("list the environment")), env)
	s.AddResource(mcp.NewResource(ResourceURI, "greeting", mcp.WithMIMEType("text/plain")),
		func(ctx context.Context, req mcp.ReadResourceRequest) ([]mcp.ResourceContents, error) {
			return []mcp.ResourceContents{mcp.TextResourceContents{URI: ResourceURI, MIMEType: "text/plain", Text: ResourceText}}, nil
		})
	s.AddPrompt(mcp.NewPrompt(PromptName, mcp.WithPromptDescription("greet someone"),
		mcp.WithArgument("name", mcp.RequiredArgument())),
		func(ctx context.Context, req mcp.GetPromptRequest) (*mcp.GetPromptResult, error) {
			return mcp.NewGetPromptResult("a greeting", []mcp.PromptMessage{
				mcp.NewPromptMessage(mcp.RoleUser, mcp.NewTextContent("Say hello to "+req.Params.Arguments["name"])),
			}), nil
		})
	return s
}

func echo(ctx context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
	return mcp.NewToolResultText(req.GetString("text", "")), nil
}

func readFile(ctx context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
	b, err := os.ReadFile(req.GetString("path", ""))
	if err != nil {
		return mcp.NewToolResultError(err.Error()), nil
	}
	return mcp.NewToolResultText(string(b)), nil
}

func writeFile(ctx context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
	if err := os.WriteFile(req.GetString("path", ""), []byte(req.GetString("content", "")), 0o644); err != nil {
		return mcp.NewToolResultError(err.Error()), nil
	}
	return mcp.NewToolResultText("ok"), nil
}

func progress(ctx context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
	steps := req.GetInt("steps", 3)
	delay := time.Duration(req.GetInt("delay_ms", 10)) * time.Millisecond
	var token mcp.ProgressToken
	if req.Params.Meta != nil {
		token = req.Params.Meta.ProgressToken
	}
	s := server.ServerFromContext(ctx)
	sent := 0
	for i := 1; i <= steps; i++ {
		select {
		case <-time.After(delay):
		case <-ctx.Done():
			return nil, ctx.Err()
		}
		if token == nil {
			continue
		}
		if err := send(ctx, s, "notifications/progress", map[string]any{
			"progressToken": token, "progress": i, "total": steps, "message": fmt.Sprintf("step %d", i),
		}); err != nil {
			return nil, err
		}
		sent++
	}
	return mcp.NewToolResultText(fmt.Sprintf("done: %d steps, %d notifications", steps, sent)), nil
}

// send delivers a notification, waiting while the server's queue is full
// (mcp-go drops rather than blocks), so a flood is paced by the client.
func send(ctx context.Context, s *server.MCPServer, method string, params map[string]any) error {
	for {
		err := s.SendNotificationToClient(ctx, method, params)
		if !errors.Is(err, server.ErrNotificationChannelBlocked) {
			return err
		}
		// The queue drains as fast as the client reads: wait a little,
		// without spinning (a spinning server starves the relay of CPU).
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(100 * time.Microsecond):
		}
	}
}

func crash(ctx context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
	code := req.GetInt("code", 3)
	fmt.Fprintf(os.Stderr, "mcptest: crashing with status %d as asked\n", code)
	os.Exit(code)
	return nil, nil
}

func flood(ctx context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
	count, size := req.GetInt("count", 1000), req.GetInt("size", 1024)
	data := strings.Repeat("x", size)
	s := server.ServerFromContext(ctx)
	for i := 0; i < count; i++ {
		if err := send(ctx, s, "notifications/message", map[string]any{
			"level": "info", "logger": "flood", "data": data,
		}); err != nil {
			return nil, err
		}
	}
	return mcp.NewToolResultText(fmt.Sprintf("flooded %d x %d bytes", count, size)), nil
}

func fetch(ctx context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	r, err := http.NewRequestWithContext(ctx, http.MethodGet, req.GetString("url", ""), nil)
	if err != nil {
		return mcp.NewToolResultError(err.Error()), nil
	}
	c := &http.Client{Transport: &http.Transport{Proxy: http.ProxyFromEnvironment}}
	resp, err := c.Do(r)
	if err != nil {
		return mcp.NewToolResultError(err.Error()), nil
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if resp.StatusCode != http.StatusOK {
		return mcp.NewToolResultError(fmt.Sprintf("HTTP %d: %s", resp.StatusCode, b)), nil
	}
	return mcp.NewToolResultText(string(b)), nil
}

func env(ctx context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
	e := os.Environ()
	sort.Strings(e)
	return mcp.NewToolResultText(strings.Join(e, "\n")), nil
}

// NPMCacheEnv names a directory holding the npm servers, overriding the
// default <module root>/.cache/mcp.
const NPMCacheEnv = "SANDBOX_RUN_MCP_CACHE"

// NPMServers locates the npm MCP servers installed by
// scripts/install-mcp-servers.sh (make mcp-deps). A missing install skips
// the test, or fails it under SANDBOX_REQUIRE=1.
func NPMServers(t testing.TB) NPM {
	t.Helper()
	dir := os.Getenv(NPMCacheEnv)
	if dir == "" {
		root, err := moduleRoot()
		if err != nil {
			t.Fatal(err)
		}
		dir = filepath.Join(root, ".cache", "mcp")
	}
	n := NPM{Dir: dir}
	for _, p := range []string{n.Filesystem(), n.Everything(), n.InspectorCLI()} {
		if _, err := os.Stat(p); err != nil {
			sandboxtest.Unavailable(t, "npm MCP servers", "run make mcp-deps (scripts/install-mcp-servers.sh): "+err.Error())
			return NPM{}
		}
	}
	node, err := exec.LookPath("node")
	if err != nil {
		sandboxtest.Unavailable(t, "node", "install Node.js 20 or newer")
		return NPM{}
	}
	n.Node = node
	return n
}

// NPM is an installed set of npm MCP servers.
type NPM struct {
	Dir  string // the cache a sandbox must be able to read (--read Dir)
	Node string // absolute path of node
}

// Filesystem is @modelcontextprotocol/server-filesystem's entry point.
func (n NPM) Filesystem() string {
	return filepath.Join(n.Dir, "node_modules/@modelcontextprotocol/server-filesystem/dist/index.js")
}

// Everything is @modelcontextprotocol/server-everything's entry point.
func (n NPM) Everything() string {
	return filepath.Join(n.Dir, "node_modules/@modelcontextprotocol/server-everything/dist/index.js")
}

// InspectorCLI is the MCP Inspector's CLI (@modelcontextprotocol/
// inspector-cli), a client that speaks the Streamable HTTP transport. Run
// it with its directory as the working directory: it reads its
// package.json from there.
func (n NPM) InspectorCLI() string {
	return filepath.Join(n.Dir, "node_modules/@modelcontextprotocol/inspector-cli/build/index.js")
}

// Conformance is the MCP conformance suite's CLI
// (@modelcontextprotocol/conformance, `conformance server --url URL`).
func (n NPM) Conformance() string {
	return filepath.Join(n.Dir, "node_modules/@modelcontextprotocol/conformance/dist/index.js")
}

// TSX is tsx's ESM loader: `node --import TSX file.ts` runs TypeScript.
func (n NPM) TSX() string {
	return filepath.Join(n.Dir, "node_modules/tsx/dist/esm/index.mjs")
}

func moduleRoot() (string, error) {
	d, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if _, err := os.Stat(filepath.Join(d, "go.mod")); err == nil {
			return d, nil
		}
		parent := filepath.Dir(d)
		if parent == d {
			return "", errors.New("mcptest: no go.mod above the working directory")
		}
		d = parent
	}
}
