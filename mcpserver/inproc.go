package mcpserver

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"sync"
)

// handlerTransport is an http.RoundTripper that serves each request with
// an http.Handler in this process: /mcp's tool calls reach ptd's own /v1
// handler without a socket. Going through the handler rather than calling
// the control plane directly keeps one code path for authorization,
// validation, idempotency and error codes; going around the socket means
// /mcp does not depend on what --listen is bound to (a wildcard address,
// a port behind a proxy) and costs no connection.
//
// The response streams: its body is a pipe the handler writes into, so
// exec streams and downloads flow as they are produced. Cancelling the
// request's context, or closing the body early, cancels the handler's
// request context, as a dropped connection would on a real server.
type handlerTransport struct {
	h   http.Handler
	log *slog.Logger
}

func (t handlerTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	ctx, cancel := context.WithCancel(req.Context())
	sreq := req.Clone(ctx)
	sreq.RequestURI = req.URL.RequestURI()
	sreq.RemoteAddr = "127.0.0.1:0"
	if sreq.Body == nil {
		sreq.Body = http.NoBody
	}
	if sreq.Host == "" {
		sreq.Host = req.URL.Host
	}
	pr, pw := io.Pipe()
	w := &pipeWriter{header: http.Header{}, pw: pw, ready: make(chan struct{})}
	go func() {
		defer func() {
			if v := recover(); v != nil {
				// http.ErrAbortHandler is a handler giving up on a reader
				// that left (a proxy to another region does, when a tool
				// closes a stream it has read enough of): net/http's
				// server does not log it either.
				if v != http.ErrAbortHandler {
					t.log.Error("in-process API call panicked", "method", req.Method, "path", req.URL.Path, "panic", v)
				}
				if !w.started() {
					w.WriteHeader(http.StatusInternalServerError)
				}
				pw.CloseWithError(fmt.Errorf("handler panicked: %v", v))
			}
			w.start(http.StatusOK)
			pw.Close()
			if req.Body != nil {
				req.Body.Close()
			}
		}()
		t.h.ServeHTTP(w, sreq)
	}()
	// Once the request ends, the handler's writes fail (they would block
	// on a reader that is gone) and the client's reads say why.
	context.AfterFunc(ctx, func() { pr.CloseWithError(ctx.Err()) })
	select {
	case <-w.ready:
	case <-ctx.Done():
		cancel()
		return nil, req.Context().Err()
	}
	return &http.Response{
		Status:     fmt.Sprintf("%d %s", w.status, http.StatusText(w.status)),
		StatusCode: w.status,
		Proto:      "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1,
		Header:        w.sent,
		Body:          &cancelBody{PipeReader: pr, ctx: req.Context(), cancel: cancel},
		ContentLength: -1,
		Request:       req,
	}, nil
}

// cancelBody ends the handler's request when the client closes the body,
// and reports a cancelled request as such, as net/http's bodies do.
type cancelBody struct {
	*io.PipeReader
	ctx    context.Context
	cancel context.CancelFunc
}

func (b *cancelBody) Read(p []byte) (int, error) {
	n, err := b.PipeReader.Read(p)
	if err != nil && b.ctx.Err() != nil {
		err = b.ctx.Err()
	}
	return n, err
}

func (b *cancelBody) Close() error {
	b.cancel()
	return b.PipeReader.CloseWithError(errBodyClosed)
}

var errBodyClosed = errors.New("response body closed")

// pipeWriter is the handler's http.ResponseWriter: the header is sent
// (ready closed) at the first WriteHeader, Write or Flush.
type pipeWriter struct {
	header http.Header
	pw     *io.PipeWriter
	once   sync.Once
	ready  chan struct{}
	status int
	// sent is the header as it was when the response started: later
	// changes are ignored, as on a real server.
	sent http.Header
}

func (w *pipeWriter) Header() http.Header { return w.header }

func (w *pipeWriter) start(status int) {
	w.once.Do(func() {
		w.status = status
		w.sent = w.header.Clone()
		close(w.ready)
	})
}

func (w *pipeWriter) started() bool {
	select {
	case <-w.ready:
		return true
	default:
		return false
	}
}

func (w *pipeWriter) WriteHeader(status int) {
	if status >= 100 && status < 200 {
		return // informational answers are not the response
	}
	w.start(status)
}

func (w *pipeWriter) Write(p []byte) (int, error) {
	w.start(http.StatusOK)
	return w.pw.Write(p)
}

// Flush sends the header; written bytes are already with the reader.
func (w *pipeWriter) Flush() { w.start(http.StatusOK) }
