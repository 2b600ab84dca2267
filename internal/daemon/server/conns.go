package server

import (
	"context"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/execbox/execbox/internal/daemon/metrics"
)

// DefaultMaxConnections is the bound on open connections when none is
// configured: half of this process's open-file limit (the rest is for
// sandboxes, the audit log and the backends), within 16–4096.
func DefaultMaxConnections() int {
	var rl syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &rl); err != nil || rl.Cur == 0 {
		return 1024
	}
	return int(min(max(rl.Cur/2, 16), 4096))
}

// connLimiter is a listener that bounds the connections open at once, in
// all and per remote address. At a bound it makes room rather than refuse:
// it closes the oldest connection that is not serving an authenticated
// request (one that sent nothing yet, is idle between requests, or is
// still sending its header) — so idle or unauthenticated connections,
// however many, never keep an authenticated client out. A request whose
// body comes slower than the minimum rate (pace.go) counts as not served:
// on a server without tokens every request is authenticated, and a body
// trickling in does no more for its sender than silence would. Only when
// every connection at the bound is serving an authenticated request is
// the new one refused (closed at once). It never blocks Accept.
type connLimiter struct {
	net.Listener
	max, perAddr int
	metrics      *metrics.Metrics

	mu     sync.Mutex
	conns  map[*limitedConn]struct{}
	byAddr map[string]int
}

func newConnLimiter(ln net.Listener, max, perAddr int, m *metrics.Metrics) *connLimiter {
	return &connLimiter{Listener: ln, max: max, perAddr: perAddr, metrics: m,
		conns: map[*limitedConn]struct{}{}, byAddr: map[string]int{}}
}

// limitedConn is one connection the limiter counts.
type limitedConn struct {
	net.Conn
	l    *connLimiter
	addr string
	// state is the http.ConnState the server last reported, since when.
	state atomic.Int32
	since atomic.Int64
	// busy counts the authenticated requests it is serving now, and body
	// is the body of the one it serves (HTTP/1: one at a time).
	busy atomic.Int32
	body atomic.Pointer[pacedBody]
}

func (c *limitedConn) evictable(now time.Time) bool {
	switch http.ConnState(c.state.Load()) {
	case http.StateNew, http.StateIdle:
		return true
	case http.StateActive:
		b := c.body.Load()
		return c.busy.Load() == 0 || b != nil && b.lagging(now)
	}
	return false
}

// Close closes the connection and stops counting it.
func (c *limitedConn) Close() error {
	c.l.drop(c)
	return c.Conn.Close()
}

// remoteAddr is the IP address of a connection's peer, "" when unknown.
func remoteAddr(a net.Addr) string {
	if t, ok := a.(*net.TCPAddr); ok {
		return t.IP.String()
	}
	host, _, err := net.SplitHostPort(a.String())
	if err != nil {
		return a.String()
	}
	return host
}

func (l *connLimiter) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		lc := &limitedConn{Conn: c, l: l, addr: remoteAddr(c.RemoteAddr())}
		lc.state.Store(int32(http.StateNew))
		lc.since.Store(time.Now().UnixNano())
		victims, ok := l.admit(lc)
		for _, v := range victims {
			v.Conn.Close()
			l.metrics.ConnShed("evicted")
		}
		if ok {
			return lc, nil
		}
		c.Close()
		l.metrics.ConnShed("refused")
	}
}

// admit counts lc in, choosing the connections to close to make room for
// it; ok is false when there is no room to make.
func (l *connLimiter) admit(lc *limitedConn) (victims []*limitedConn, ok bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.byAddr[lc.addr] >= l.perAddr {
		v := l.oldest(lc.addr)
		if v == nil {
			return nil, false
		}
		l.remove(v)
		victims = append(victims, v)
	}
	if len(l.conns) >= l.max {
		v := l.oldest("")
		if v == nil {
			return victims, false
		}
		l.remove(v)
		victims = append(victims, v)
	}
	l.conns[lc] = struct{}{}
	l.byAddr[lc.addr]++
	return victims, true
}

// oldest is the evictable connection (of addr, unless "") longest in its
// state; the caller holds l.mu.
func (l *connLimiter) oldest(addr string) *limitedConn {
	var v *limitedConn
	now := time.Now()
	for c := range l.conns {
		if (addr == "" || c.addr == addr) && (v == nil || c.since.Load() < v.since.Load()) && c.evictable(now) {
			v = c
		}
	}
	return v
}

// remove stops counting c; the caller holds l.mu.
func (l *connLimiter) remove(c *limitedConn) {
	if _, ok := l.conns[c]; !ok {
		return
	}
	delete(l.conns, c)
	if l.byAddr[c.addr]--; l.byAddr[c.addr] <= 0 {
		delete(l.byAddr, c.addr)
	}
}

func (l *connLimiter) drop(c *limitedConn) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.remove(c)
}

// open is how many connections are counted.
func (l *connLimiter) open() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.conns)
}

// connState is the http.Server's ConnState hook.
func (l *connLimiter) connState(c net.Conn, st http.ConnState) {
	lc, ok := c.(*limitedConn)
	if !ok {
		return
	}
	lc.state.Store(int32(st))
	lc.since.Store(time.Now().UnixNano())
	if st == http.StateClosed || st == http.StateHijacked {
		l.drop(lc)
	}
}

type connKey struct{}

// connContext is the http.Server's ConnContext hook: the request's
// context knows its connection.
func connContext(ctx context.Context, c net.Conn) context.Context {
	return context.WithValue(ctx, connKey{}, c)
}

// serving marks r's connection as serving an authenticated request until
// done is called: the limiter does not evict it meanwhile, unless its
// body falls behind the minimum rate. It paces r's body (pace.go).
func (s *Server) serving(r *http.Request) (done func()) {
	body := s.pace(r.Body)
	r.Body = body
	lc, ok := r.Context().Value(connKey{}).(*limitedConn)
	if !ok {
		return func() {}
	}
	lc.body.Store(body)
	lc.busy.Add(1)
	return func() {
		lc.busy.Add(-1)
		lc.body.CompareAndSwap(body, nil)
	}
}
