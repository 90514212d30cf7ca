package llm

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httputil"
	"sync/atomic"
	"time"

	"github.com/sandbox-run/sandbox-run/internal/audit"
)

// Serve relays HTTP requests on ln to the LLM proxy on the Unix socket
// at socket and appends one "llm_request" line per request to audit: the
// method, the path (never the query, which may hold a key), the status,
// the body bytes each way and the duration. Headers and bodies, where keys
// and prompts live, are never recorded. Streaming responses are flushed as
// they come; upgrades (WebSocket) are relayed. With key (--llm-key-env)
// each request also gets the provider key here, outside (Key), and its
// line names the model and the tokens the response reports. It returns
// when ctx is done.
func Serve(ctx context.Context, ln net.Listener, socket, runID string, aw io.Writer, log *slog.Logger, key Key) error {
	tr := &http.Transport{
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, "unix", socket)
		},
		MaxIdleConnsPerHost: 16,
		IdleConnTimeout:     90 * time.Second,
	}
	rp := &httputil.ReverseProxy{
		// The request goes on as it came: same Host, no X-Forwarded-*.
		Rewrite: func(pr *httputil.ProxyRequest) {
			pr.Out.URL.Scheme, pr.Out.URL.Host = "http", pr.In.Host
			pr.Out.Host = pr.In.Host
			key.put(pr.Out)
		},
		ModifyResponse: key.scrub,
		Transport:      tr,
		FlushInterval:  -1,
		ErrorLog:       slog.NewLogLogger(log.Handler(), slog.LevelDebug),
	}
	srv := &http.Server{
		Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			start := time.Now()
			if refused := key.refuse(w, r); refused != nil {
				audit.Event(aw, runID, "llm_request", refused)
				return
			}
			body := &countingBody{ReadCloser: r.Body}
			r.Body = body
			cw := &countingWriter{ResponseWriter: w, status: http.StatusOK}
			m := key.meter(r)
			rp.ServeHTTP(cw, r)
			f := map[string]any{
				"method": r.Method, "path": r.URL.Path, "status": cw.status,
				"bytes_out": body.n.Load(), "bytes_in": cw.n.Load(),
				"duration_ms": time.Since(start).Milliseconds(),
			}
			m.fields(f)
			audit.Event(aw, runID, "llm_request", f)
		}),
		ReadHeaderTimeout: 30 * time.Second,
		BaseContext:       func(net.Listener) context.Context { return ctx },
		ErrorLog:          slog.NewLogLogger(log.Handler(), slog.LevelDebug),
	}
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	select {
	case <-ctx.Done():
		srv.Close()
		tr.CloseIdleConnections()
		<-errc
		return nil
	case err := <-errc:
		if errors.Is(err, http.ErrServerClosed) {
			return nil
		}
		return err
	}
}

type countingBody struct {
	io.ReadCloser
	n atomic.Int64
}

func (b *countingBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	b.n.Add(int64(n))
	return n, err
}

// countingWriter counts the response body and keeps the status; Flush and
// Hijack reach the underlying writer (streaming, upgrades).
type countingWriter struct {
	http.ResponseWriter
	status int
	n      atomic.Int64
}

func (w *countingWriter) WriteHeader(code int) {
	w.status = code
	w.ResponseWriter.WriteHeader(code)
}

func (w *countingWriter) Write(p []byte) (int, error) {
	n, err := w.ResponseWriter.Write(p)
	w.n.Add(int64(n))
	return n, err
}

// Unwrap lets http.ResponseController find Flush and Hijack.
func (w *countingWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }
