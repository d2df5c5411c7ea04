package httpapi

import (
	"io"
	"net/http"
	"sync"
	"time"
)

// Defaults of the per-request deadlines (Config.BodyReadTimeout and
// Config.WriteTimeout).
const (
	// DefaultBodyReadTimeout is how long a client has, from the moment its
	// request headers have been read, to send the whole request body.
	DefaultBodyReadTimeout = 30 * time.Second
	// DefaultWriteTimeout is how long handling a request and writing its
	// answer may take, from the moment its headers have been read. A
	// long-polling claim gets its longest wait (Config.MaxClaimWait) on
	// top.
	DefaultWriteTimeout = 60 * time.Second
)

// longPollRoutes are the routes (as registered: method, space, pattern)
// that may hold a request open waiting for work: their write deadline is
// extended by Config.MaxClaimWait. Their bodies are small and get the
// ordinary body deadline.
var longPollRoutes = map[string]bool{
	"POST /v1/workers/{id}/claim": true,
}

// Deadlines returns h wrapped so that each request's body must arrive
// within read and its answer must be written within write, both measured
// from the moment the handler is called. A client that sends its body too
// slowly gets a read error (the API answers 400) and its connection is
// closed; a client that reads the answer too slowly has its connection
// closed. A zero or negative duration leaves that deadline unset.
//
// Deadlines are set on the connection through http.ResponseController, so
// they need a ResponseWriter from net/http's HTTP/1 or HTTP/2 server (or
// one that unwraps to it); with another writer the request is served
// without them. Server.ServeHTTP applies Config.BodyReadTimeout and
// Config.WriteTimeout itself; use Deadlines for other handlers on the same
// http.Server (a dashboard, /metrics), whose keep-alive connections would
// otherwise carry the deadlines of an earlier API request.
func Deadlines(h http.Handler, read, write time.Duration) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h.ServeHTTP(w, setDeadlines(w, r, read, write))
	})
}

// setDeadlines sets r's body read deadline and w's write deadline (see
// Deadlines) and returns r, whose Body may be wrapped.
//
// Once the body has been read to its end the read deadline is moved to the
// write deadline: net/http keeps reading the connection in the background
// to notice a client that goes away, and a read deadline passing there
// would cancel the request's context while its handler still works (a
// long-poll, a slow store call). For the same reason a request without a
// body gets the write deadline as its read deadline at once.
func setDeadlines(w http.ResponseWriter, r *http.Request, read, write time.Duration) *http.Request {
	rc := http.NewResponseController(w)
	now := time.Now()
	var wd time.Time // zero: no deadline
	if write > 0 {
		wd = now.Add(write)
		if err := rc.SetWriteDeadline(wd); err != nil {
			return r // the writer cannot take deadlines; nothing else will work either
		}
	}
	if read <= 0 {
		_ = rc.SetReadDeadline(wd)
		return r
	}
	if r.Body == nil || r.Body == http.NoBody || r.ContentLength == 0 {
		_ = rc.SetReadDeadline(wd)
		return r
	}
	_ = rc.SetReadDeadline(now.Add(read))
	r2 := *r
	r2.Body = &deadlineBody{ReadCloser: r.Body, atEOF: func() { _ = rc.SetReadDeadline(wd) }}
	return &r2
}

// extendWrite moves the write deadline (and, when the body has been read,
// the read deadline) of a long-polling request to by from now. A body not
// yet read keeps its read deadline until it has been.
func extendWrite(w http.ResponseWriter, r *http.Request, by time.Duration) {
	if by <= 0 {
		return
	}
	rc := http.NewResponseController(w)
	wd := time.Now().Add(by)
	if rc.SetWriteDeadline(wd) != nil {
		return
	}
	if b, ok := r.Body.(*deadlineBody); ok {
		b.setAtEOF(func() { _ = rc.SetReadDeadline(wd) })
		return
	}
	_ = rc.SetReadDeadline(wd)
}

// deadlineBody calls atEOF once, when the body has been read to its end.
type deadlineBody struct {
	io.ReadCloser
	mu    sync.Mutex
	done  bool
	atEOF func()
}

func (b *deadlineBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	if err == io.EOF {
		b.mu.Lock()
		if !b.done {
			b.done = true
			b.atEOF()
		}
		b.mu.Unlock()
	}
	return n, err
}

// setAtEOF replaces the function called at the end of the body, or calls
// it now when the end has been read already.
func (b *deadlineBody) setAtEOF(f func()) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.done {
		f()
		return
	}
	b.atEOF = f
}

// hasBody reports whether r announces a body that may still be on the
// wire.
func hasBody(r *http.Request) bool {
	return r.Body != nil && r.Body != http.NoBody && r.ContentLength != 0
}

// RefuseBody prepares the answer to a request refused before its body was
// read (no or a bad token, a route that does not exist); call it before
// writing the answer. The connection is closed after the answer instead
// of being kept for the next request, and the body is not drained first:
// without this net/http reads up to 256 KiB of an unread body, at whatever
// pace the client sends it, before writing the answer and closing or
// reusing the connection. It does nothing for a request without a body or
// whose body has been read (through a Deadlines wrapper).
func RefuseBody(w http.ResponseWriter, r *http.Request) {
	if !hasBody(r) {
		return
	}
	if b, ok := r.Body.(*deadlineBody); ok {
		b.mu.Lock()
		done := b.done
		b.mu.Unlock()
		if done {
			return
		}
	}
	w.Header().Set("Connection", "close")
	// A deadline in the past ends the drain at once; the answer is written
	// under the write deadline.
	_ = http.NewResponseController(w).SetReadDeadline(time.Now().Add(-time.Second))
}
