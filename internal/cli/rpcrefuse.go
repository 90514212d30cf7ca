package cli

import (
	"bufio"
	"encoding/json"
	"io"
	"os"
	"strings"
	"sync/atomic"
	"time"
)

// clientWait bounds how long a refusal waits for an MCP client's first
// request: a client writes initialize as soon as it has started its
// server, and a refusal must not hang on a pipe that never speaks.
const clientWait = 2 * time.Second

// maxClientLines bounds the lines read looking for a request (a client
// may send notifications first).
const maxClientLines = 8

// failClient refuses like fail and, when stdin is a pipe or socket whose
// first request within clientWait is JSON-RPC, also answers that request
// with a JSON-RPC error carrying the same line: an MCP client that started
// sandbox-run as its server then shows the reason, where it would
// otherwise only see the server exit. Nothing is written to stdout for
// any other input.
func failClient(stdio IO, err error) int {
	code := fail(stdio.Stderr, err)
	if stdio.Stdin == nil || stdio.Stdout == nil || !isPipe(stdio.Stdin) {
		return code
	}
	id := make(chan json.RawMessage, 1)
	go func() { id <- firstRequestID(stdio.Stdin) }()
	t := time.NewTimer(clientWait)
	defer t.Stop()
	select {
	case raw := <-id:
		if raw != nil {
			stdio.Stdout.Write(rpcError(raw, "sandbox-run: "+strings.ReplaceAll(err.Error(), "\n", " ")))
		}
	case <-t.C:
		// The reader goroutine stays blocked; the process is about to exit.
	}
	return code
}

func isPipe(f *os.File) bool {
	fi, err := f.Stat()
	return err == nil && fi.Mode()&(os.ModeNamedPipe|os.ModeSocket) != 0
}

// firstRequestID returns the id of the first JSON-RPC 2.0 request among
// the first maxClientLines lines of r, nil when there is none.
func firstRequestID(r io.Reader) json.RawMessage {
	br := bufio.NewReaderSize(r, 64<<10)
	for range maxClientLines {
		line, err := readLine(br, 1<<20)
		var m struct {
			JSONRPC string          `json:"jsonrpc"`
			Method  string          `json:"method"`
			ID      json.RawMessage `json:"id"`
		}
		if json.Unmarshal(line, &m) == nil && m.JSONRPC == "2.0" && m.Method != "" && len(m.ID) > 0 && string(m.ID) != "null" {
			return m.ID
		}
		if err != nil {
			return nil
		}
	}
	return nil
}

// readLine reads one line of at most limit bytes; a longer one is
// returned cut (it will not parse).
func readLine(br *bufio.Reader, limit int) ([]byte, error) {
	var out []byte
	for {
		chunk, err := br.ReadSlice('\n')
		if len(out)+len(chunk) <= limit {
			out = append(out, chunk...)
		}
		if err != bufio.ErrBufferFull {
			return out, err
		}
	}
}

// rpcError renders a JSON-RPC internal error (-32603) for id as one line.
func rpcError(id json.RawMessage, msg string) []byte {
	b, _ := json.Marshal(struct {
		JSONRPC string          `json:"jsonrpc"`
		ID      json.RawMessage `json:"id"`
		Error   struct {
			Code    int    `json:"code"`
			Message string `json:"message"`
		} `json:"error"`
	}{JSONRPC: "2.0", ID: id, Error: struct {
		Code    int    `json:"code"`
		Message string `json:"message"`
	}{-32603, msg}})
	return append(b, '\n')
}

// watchFirst relays stdin to the returned reader line by line and sends
// on the channel the id of the first JSON-RPC request among the first
// maxClientLines lines as it passes (the channel is closed without one
// when the input ends or those lines hold none). The relay gets every
// byte as it comes; nothing waits for the client. stop ends the relaying
// once the reader is no longer read. A stdin that is not a pipe or socket
// is returned as it is, with a nil channel.
func watchFirst(stdin *os.File) (io.Reader, <-chan json.RawMessage, func()) {
	if stdin == nil || !isPipe(stdin) {
		return stdin, nil, func() {}
	}
	pr, pw := io.Pipe()
	ids := make(chan json.RawMessage, 1)
	go func() {
		br := bufio.NewReaderSize(stdin, 64<<10)
		found, lines, whole := false, 0, true
		report := func(id json.RawMessage) {
			if !found {
				found = true
				if id != nil {
					ids <- id
				}
				close(ids)
			}
		}
		for {
			chunk, err := br.ReadSlice('\n')
			if !found && len(chunk) > 0 {
				// Only a line read whole (within the buffer) is looked at.
				if whole && err != bufio.ErrBufferFull {
					if id := requestID(chunk); id != nil {
						report(id)
					}
				}
				whole = err != bufio.ErrBufferFull
				if whole {
					if lines++; lines >= maxClientLines {
						report(nil)
					}
				}
			}
			if len(chunk) > 0 {
				if _, werr := pw.Write(chunk); werr != nil {
					report(nil)
					return
				}
			}
			if err != nil && err != bufio.ErrBufferFull {
				report(nil)
				pw.CloseWithError(err)
				return
			}
		}
	}()
	return pr, ids, func() { pr.Close() }
}

// requestID is the id of line when it is a JSON-RPC 2.0 request, else nil.
func requestID(line []byte) json.RawMessage {
	var m struct {
		JSONRPC string          `json:"jsonrpc"`
		Method  string          `json:"method"`
		ID      json.RawMessage `json:"id"`
	}
	if json.Unmarshal(line, &m) == nil && m.JSONRPC == "2.0" && m.Method != "" && len(m.ID) > 0 && string(m.ID) != "null" {
		return m.ID
	}
	return nil
}

// writeCounter counts the bytes written through it.
type writeCounter struct {
	w io.Writer
	n atomic.Int64
}

func (c *writeCounter) Write(b []byte) (int, error) {
	n, err := c.w.Write(b)
	c.n.Add(int64(n))
	return n, err
}
