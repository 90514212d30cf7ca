//go:build linux

package main

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"time"

	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"

	"github.com/sandbox-run/sandbox-run/internal/mcptest"
)

// mcpServerMain is the hidden mode `mcp-server`: the mcptest MCP server
// (the Go test server of internal/mcptest) on stdio.
func mcpServerMain() int {
	if err := server.ServeStdio(mcptest.NewServer()); err != nil {
		fmt.Fprintln(os.Stderr, "mcp-server:", err)
		return 1
	}
	return 0
}

// mcpResult is what `mcp-client` prints: the session start (spawning the
// server and the initialize round trip) and each tools/call's latency.
type mcpResult struct {
	InitNS int64   `json:"init_ns"`
	LatNS  []int64 `json:"lat_ns"`
}

// mcpClientMain is the hidden mode `mcp-client -n N -- CMD [ARG...]`: an
// mcp-go stdio client that starts CMD, initializes, makes N sequential
// tools/call echo round trips and prints the result as one JSON line. The
// same client runs against the server directly and through the relay.
func mcpClientMain(args []string) int {
	fs := flag.NewFlagSet("mcp-client", flag.ContinueOnError)
	n := fs.Int("n", 100, "sequential tools/call round trips")
	if err := fs.Parse(args); err != nil || fs.NArg() < 1 || *n < 1 || *n > 100000 {
		fmt.Fprintln(os.Stderr, "usage: mcp-client [-n N] -- CMD [ARG...]")
		return 2
	}
	cmd := fs.Args()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	start := time.Now()
	c, err := client.NewStdioMCPClient(cmd[0], nil, cmd[1:]...)
	if err != nil {
		fmt.Fprintln(os.Stderr, "mcp-client: start:", err)
		return 1
	}
	defer c.Close()
	init := mcp.InitializeRequest{}
	init.Params.ProtocolVersion = mcp.LATEST_PROTOCOL_VERSION
	init.Params.ClientInfo = mcp.Implementation{Name: "sbx-bench", Version: "1"}
	if _, err := c.Initialize(ctx, init); err != nil {
		fmt.Fprintln(os.Stderr, "mcp-client: initialize:", err)
		return 1
	}
	res := mcpResult{InitNS: int64(time.Since(start))}
	req := mcp.CallToolRequest{}
	req.Params.Name = "echo"
	req.Params.Arguments = map[string]any{"text": "hello from sbx-bench"}
	for i := 0; i < *n; i++ {
		t := time.Now()
		r, err := c.CallTool(ctx, req)
		if err != nil {
			fmt.Fprintf(os.Stderr, "mcp-client: call %d: %v\n", i, err)
			return 1
		}
		if r.IsError || len(r.Content) != 1 {
			fmt.Fprintf(os.Stderr, "mcp-client: call %d: unexpected result %+v\n", i, r)
			return 1
		}
		res.LatNS = append(res.LatNS, int64(time.Since(t)))
	}
	_ = json.NewEncoder(os.Stdout).Encode(res)
	return 0
}

// Names of the MCP variants.
const (
	mDirect = "direct (client ↔ server)"
	mRelay  = "sandbox-run mcp (client ↔ relay ↔ sandboxed server)"
	mGvisor = "sandbox-run mcp --sandbox gvisor (server under gVisor)"
)

// mcpResults is section 7: per variant, the pooled round trips and the
// session starts.
type mcpResults struct {
	calls  map[string]sample
	starts map[string]sample
	failed map[string]error
	skip   string // why the relay was not measured, when it was not
}

// measureMCP runs batches of n sequential tools/call round trips against
// the mcptest server started directly and through `sandbox-run mcp`,
// interleaved. A relay that fails its first batch is reported, not
// retried.
func (e *env) measureMCP(batches, n int, deadline time.Time) *mcpResults {
	res := &mcpResults{calls: map[string]sample{}, starts: map[string]sample{}, failed: map[string]error{}}
	if out, err := exec.Command(e.bin, "mcp", "--help").CombinedOutput(); err != nil {
		res.skip = fmt.Sprintf("`sandbox-run mcp --help` failed (%v: %s)", err, oneLine(string(out)))
		return res
	}
	client := []string{"mcp-client", "-n", fmt.Sprint(n), "--"}
	vs := []struct {
		name string
		argv []string
	}{
		{mDirect, append(append([]string{}, client...), e.exe, "mcp-server")},
		{mRelay, append(append([]string{}, client...), e.bin, "mcp", "--workdir", e.work, "--read", e.binDir, "--", e.exe, "mcp-server")},
	}
	if _, err := exec.LookPath("runsc"); err == nil {
		vs = append(vs, struct {
			name string
			argv []string
		}{mGvisor, append(append([]string{}, client...), e.bin, "mcp", "--sandbox", "gvisor", "--workdir", e.work, "--read", e.binDir, "--", e.exe, "mcp-server")})
	}
	for r := 0; r < batches; r++ {
		if r > 0 && time.Now().After(deadline) {
			break
		}
		for k := range vs {
			v := vs[(k+r)%len(vs)]
			if res.failed[v.name] != nil {
				continue
			}
			ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
			c := exec.CommandContext(ctx, e.exe, v.argv...)
			var out, stderr bytes.Buffer
			c.Stdout, c.Stderr = &out, &stderr
			c.WaitDelay = 5 * time.Second
			err := c.Run()
			cancel()
			var mr mcpResult
			if err == nil {
				err = json.Unmarshal(bytes.TrimSpace(out.Bytes()), &mr)
			}
			if err != nil {
				res.failed[v.name] = fmt.Errorf("%v: %s", err, lastLines(stderr.String(), 5))
				fmt.Fprintf(os.Stderr, "bench: mcp: %s: %v\n", v.name, res.failed[v.name])
				continue
			}
			res.starts[v.name] = append(res.starts[v.name], time.Duration(mr.InitNS))
			for _, ns := range mr.LatNS {
				res.calls[v.name] = append(res.calls[v.name], time.Duration(ns))
			}
		}
	}
	return res
}

func (r *report) mcpSection(w func(string, ...any)) {
	w("## 7. MCP: tools/call round trip\n\n")
	m := r.mcp
	if m == nil {
		w("Not measured in this run.\n\n")
		return
	}
	if m.skip != "" {
		w("Not measured: %s.\n\n", m.skip)
		return
	}
	w("The same mcp-go stdio client (this program's `mcp-client` mode) against the same server (internal/mcptest's Go MCP server, "+
		"this program's `mcp-server` mode): started directly, and through `sandbox-run mcp --workdir W --read BIN -- SERVER` "+
		"(the relay parses each message, applies the tool rules and audit, and the server runs in the sandbox). "+
		"Each batch starts a session, initializes, and makes sequential `tools/call echo` round trips; %d calls per variant in total, "+
		"batches interleaved. The session start (spawn to initialize answered) includes the sandbox's start-up for the relay.\n\n",
		len(m.calls[mDirect]))
	w("| path | calls | p50 | p99 | max | p50 added over direct | session start (median) |\n|---|---:|---:|---:|---:|---:|---:|\n")
	d := m.calls[mDirect]
	for _, name := range []string{mDirect, mRelay, mGvisor} {
		t := m.calls[name]
		if len(t) == 0 {
			if err := m.failed[name]; err != nil {
				w("| %s | failed: %s | | | | | |\n", name, oneLine(err.Error()))
			}
			continue
		}
		w("| %s | %d | %s | %s | %s | %s | %s |\n", name, len(t), us(t.quantile(0.5)), us(t.quantile(0.99)), us(t.max()),
			us(t.quantile(0.5)-d.quantile(0.5)), ms(m.starts[name].median()))
	}
	w("\n")
	if s := m.calls[mRelay]; len(s) > 0 && len(d) > 0 {
		w("Through the relay a round trip takes **%s** the direct one at the median (p99: %s): two more pipe hops "+
			"(client → relay → server and back) and the relay's parsing of each message. The session start through the relay "+
			"(%s) is mostly the sandbox's start-up (section 1).\n\n",
			ratio(s.quantile(0.5), d.quantile(0.5)), ratio(s.quantile(0.99), d.quantile(0.99)), ms(m.starts[mRelay].median()))
	}
	r.failures(w, m.failed)
}

// mcpGoal is the summary row for section 7.
func (r *report) mcpGoal() ([3]string, bool) {
	m := r.mcp
	if m == nil {
		return [3]string{}, false
	}
	if m.skip != "" || len(m.calls[mRelay]) == 0 {
		why := m.skip
		if err := m.failed[mRelay]; err != nil {
			why = "failed: " + oneLine(err.Error())
		}
		return [3]string{"MCP: relay round trip vs direct (no goal set)", "not measured", strings.ReplaceAll(why, "|", "/")}, true
	}
	d, s := m.calls[mDirect], m.calls[mRelay]
	if len(d) == 0 {
		return [3]string{}, false
	}
	return [3]string{"MCP: tools/call p50 via relay vs direct (no goal set)",
		fmt.Sprintf("%s (+%s)", ratio(s.quantile(0.5), d.quantile(0.5)), us(s.quantile(0.5)-d.quantile(0.5))), "—"}, true
}
