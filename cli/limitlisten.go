package cli

import (
	"net"
	"sync"
)

// limitListener accepts at most n connections at a time: once n are open,
// Accept waits until one of them closes, and clients over the cap wait in
// the kernel's listen backlog (or are refused by the kernel once that is
// full). It bounds the file descriptors, goroutines and buffers that slow
// or idle clients can hold.
type limitListener struct {
	net.Listener
	sem  chan struct{}
	done chan struct{} // closed by Close: a waiting Accept returns
	once sync.Once
}

// newLimitListener wraps l to hold at most n (≥ 1) connections open.
func newLimitListener(l net.Listener, n int) *limitListener {
	return &limitListener{Listener: l, sem: make(chan struct{}, n), done: make(chan struct{})}
}

// Accept waits for a free slot, then for a connection.
func (l *limitListener) Accept() (net.Conn, error) {
	select {
	case l.sem <- struct{}{}:
	case <-l.done:
		return nil, net.ErrClosed
	}
	c, err := l.Listener.Accept()
	if err != nil {
		<-l.sem
		return nil, err
	}
	return &limitConn{Conn: c, release: func() { <-l.sem }}, nil
}

// Close closes the listener and ends a waiting Accept.
func (l *limitListener) Close() error {
	l.once.Do(func() { close(l.done) })
	return l.Listener.Close()
}

// open returns how many accepted connections are open.
func (l *limitListener) open() int { return len(l.sem) }

// limitConn gives its slot back when it is closed (once, however often
// Close is called).
type limitConn struct {
	net.Conn
	once    sync.Once
	release func()
}

func (c *limitConn) Close() error {
	err := c.Conn.Close()
	c.once.Do(c.release)
	return err
}

// CloseWrite half-closes a TCP connection, as net/http does before closing
// a connection whose client may still be sending (so that the client reads
// the answer instead of a reset).
func (c *limitConn) CloseWrite() error {
	if cw, ok := c.Conn.(interface{ CloseWrite() error }); ok {
		return cw.CloseWrite()
	}
	return nil
}
