// Package connlimit bounds the connections a server holds at once, by peer
// host and in all, so that no client can take the descriptors a process
// needs for its own files: a node whose membership port held 20,000 idle
// connections could no longer open its next checkpoint and its run ended.
//
// A Counter counts open connections; its Listener closes the ones over the
// limits as they are accepted, and waits out a failing Accept (out of
// descriptors) instead of returning the error, which an http.Server would
// log every 5 ms. A server that accepts on its own (gRPC behind proto.actor)
// calls Take for each new connection and Wrap on the connection it keeps.
//
//	c := connlimit.New(connlimit.Limits{PerHost: 64, Total: 512})
//	srv.Serve(c.Listener(lis, func(peer string, err error) { log.Printf("refused %s: %v", peer, err) }))
package connlimit

import (
	"errors"
	"fmt"
	"net"
	"sync"
	"syscall"
	"time"
)

// Limits bound the connections a server holds at once.
type Limits struct {
	// PerHost bounds the connections from one peer host (IP address).
	PerHost int
	// Total bounds the connections from all peers.
	Total int
}

// Scaled returns l with Total at most a fraction 1/share of the process's
// descriptor limit (its soft RLIMIT_NOFILE), and PerHost at most Total:
// several servers in one process, each a share, leave the rest to files.
func (l Limits) Scaled(share int) Limits {
	if n := fileLimit(); n > 0 && share > 0 {
		l.Total = int(min(uint64(l.Total), max(n/uint64(share), 1)))
	}
	l.PerHost = min(l.PerHost, l.Total)
	return l
}

// ErrLimit is the error of a connection refused for a limit; ErrTotal,
// which wraps it, of one refused for the total.
var (
	ErrLimit = errors.New("too many connections")
	ErrTotal = fmt.Errorf("%w in all", ErrLimit)
)

// Counter counts a server's open connections by peer host. Safe for
// concurrent use.
type Counter struct {
	limits Limits

	mu     sync.Mutex
	total  int
	byHost map[string]int
}

// New returns a Counter of connections under l.
func New(l Limits) *Counter {
	return &Counter{limits: l, byHost: map[string]int{}}
}

// Limits are c's limits.
func (c *Counter) Limits() Limits { return c.limits }

// Open is the number of connections counted now.
func (c *Counter) Open() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.total
}

// Take counts a new connection from addr and returns the function that
// uncounts it (call it once, when the connection closes), or an error
// wrapping ErrLimit (ErrTotal for the total), with nothing counted, when
// the connection would pass a limit.
func (c *Counter) Take(addr net.Addr) (release func(), err error) {
	host := hostOf(addr)
	c.mu.Lock()
	defer c.mu.Unlock()
	switch {
	case c.total >= c.limits.Total:
		return nil, fmt.Errorf("%w: %d open, the most this server holds", ErrTotal, c.total)
	case c.byHost[host] >= c.limits.PerHost:
		return nil, fmt.Errorf("%w: %d open from %s, the most one host may hold", ErrLimit, c.byHost[host], host)
	}
	c.total++
	c.byHost[host]++
	var once sync.Once
	return func() { once.Do(func() { c.release(host) }) }, nil
}

// release uncounts a connection from host.
func (c *Counter) release(host string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.total--
	if c.byHost[host]--; c.byHost[host] == 0 {
		delete(c.byHost, host)
	}
}

// hostOf is the IP address of addr, or addr itself when it has no port.
func hostOf(addr net.Addr) string {
	if a, ok := addr.(*net.TCPAddr); ok {
		return a.IP.String()
	}
	s := addr.String()
	if host, _, err := net.SplitHostPort(s); err == nil {
		return host
	}
	return s
}

// Wrap returns conn, whose Close calls release (once).
func Wrap(conn net.Conn, release func()) net.Conn {
	return &counted{Conn: conn, release: release}
}

// counted is a connection that is uncounted when it closes.
type counted struct {
	net.Conn
	release func()
}

// Close implements net.Conn.
func (c *counted) Close() error {
	err := c.Conn.Close()
	c.release()
	return err
}

// Listener returns lis whose Accept counts each connection (uncounted when
// it closes) and closes at once those over c's limits, calling refused
// (when not nil) with the peer's address and why. An Accept that fails
// for want of descriptors or memory, or with a connection aborted before
// it was accepted, is tried again after a pause growing to a second,
// calling refused once with peer "" at the first failure of a run of them.
func (c *Counter) Listener(lis net.Listener, refused func(peer string, err error)) net.Listener {
	if refused == nil {
		refused = func(string, error) {}
	}
	return &listener{Listener: lis, c: c, refused: refused}
}

// listener is Counter.Listener's.
type listener struct {
	net.Listener
	c       *Counter
	refused func(peer string, err error)
}

// Accept implements net.Listener.
func (l *listener) Accept() (net.Conn, error) {
	pause := time.Duration(0)
	for {
		conn, err := l.Listener.Accept()
		if err != nil {
			if !passing(err) {
				return nil, err
			}
			if pause == 0 {
				l.refused("", err)
			}
			pause = min(max(2*pause, 5*time.Millisecond), time.Second)
			time.Sleep(pause)
			continue
		}
		pause = 0
		release, err := l.c.Take(conn.RemoteAddr())
		if err != nil {
			l.refused(conn.RemoteAddr().String(), err)
			conn.Close()
			continue
		}
		return Wrap(conn, release), nil
	}
}

// passing reports whether an Accept error is one that passes: out of
// descriptors or buffers, or a connection aborted by its peer.
func passing(err error) bool {
	for _, e := range []error{syscall.EMFILE, syscall.ENFILE, syscall.ENOBUFS, syscall.ENOMEM, syscall.ECONNABORTED} {
		if errors.Is(err, e) {
			return true
		}
	}
	return false
}
