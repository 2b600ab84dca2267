package mcpserver

import (
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
)

// inProcess is a RoundTripper that answers with the API's handler itself.
// The answer streams through a pipe as the handler writes it, so the
// handler is still writing — holding what it holds for the answer (its
// run slot, its result memory) — until the caller has read it; nothing
// keeps a whole answer.
type inProcess struct {
	h http.Handler
	// auth is the MCP request's Authorization header, passed on as it
	// came: the API parses it as it parses any.
	auth string
	// out, when set, takes the output of a 2xx JSON answer (a run's
	// result): the caller reads the rest (see lean).
	out *output
}

func (p inProcess) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.RemoteAddr = "127.0.0.1:0"
	if p.auth != "" {
		r.Header.Set("Authorization", p.auth)
	}
	pr, pw := io.Pipe()
	w := &pipeWriter{header: http.Header{}, pw: pw, out: p.out, ready: make(chan struct{})}
	go func() {
		var err error
		defer func() {
			// A handler that cuts its answer short (http.ErrAbortHandler,
			// as a download that fails midway does), or one that panics,
			// is a failed request here: the body ends with an error.
			if v := recover(); v != nil {
				err = fmt.Errorf("%s %s: the answer was cut short", r.Method, r.URL.Path)
				if v != http.ErrAbortHandler {
					err = fmt.Errorf("%s %s: the handler failed: %v", r.Method, r.URL.Path, v)
				}
			}
			w.WriteHeader(http.StatusOK) // a handler that wrote nothing: 200, as net/http answers
			pw.CloseWithError(err)
		}()
		p.h.ServeHTTP(w, r)
	}()
	select {
	case <-w.ready:
	case <-r.Context().Done():
		// The handler sees the same context and ends; its writes fail.
		pr.CloseWithError(r.Context().Err())
		return nil, r.Context().Err()
	}
	return &http.Response{Status: fmt.Sprintf("%d %s", w.code, http.StatusText(w.code)), StatusCode: w.code,
		Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1, Header: w.sent, Body: pr, ContentLength: -1, Request: r}, nil
}

// pipeWriter is the handler's ResponseWriter: the status and headers once
// written, then the body into the pipe.
type pipeWriter struct {
	header http.Header
	pw     *io.PipeWriter
	out    *output
	ready  chan struct{} // closed when the status is written
	once   sync.Once
	code   int
	sent   http.Header
	body   io.Writer // pw, or a lean filter in front of it
}

func (w *pipeWriter) Header() http.Header { return w.header }

func (w *pipeWriter) WriteHeader(code int) {
	w.once.Do(func() {
		w.code, w.sent, w.body = code, w.header.Clone(), w.pw
		if w.out != nil && code/100 == 2 && strings.HasPrefix(w.sent.Get("Content-Type"), "application/json") {
			w.body = newLean(w.pw, w.out)
		}
		close(w.ready)
	})
}

func (w *pipeWriter) Write(b []byte) (int, error) {
	w.WriteHeader(http.StatusOK)
	n, err := w.body.Write(b)
	if err != nil {
		w.pw.CloseWithError(err) // the reader gets it (unless it closed first)
	}
	return n, err
}

// Flush is a no-op: every write reaches the reader as it is made.
func (w *pipeWriter) Flush() {}
