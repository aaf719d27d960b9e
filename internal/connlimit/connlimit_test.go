package connlimit

import (
	"errors"
	"io"
	"net"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

func tcp(ip string, port int) net.Addr { return &net.TCPAddr{IP: net.ParseIP(ip), Port: port} }

// TestTake: connections are counted by host and in all; one over a limit
// is refused with nothing counted, and a release makes room again.
func TestTake(t *testing.T) {
	type step struct {
		from    string
		release int // >0: release the connection taken at this step (1-based) instead
		ok      bool
		why     string
	}
	for _, tc := range []struct {
		name   string
		limits Limits
		steps  []step
		open   int
	}{
		{"per host", Limits{PerHost: 2, Total: 10}, []step{
			{from: "10.0.0.1", ok: true}, {from: "10.0.0.1", ok: true},
			{from: "10.0.0.1", why: "too many connections: 2 open from 10.0.0.1, the most one host may hold"},
			{from: "10.0.0.2", ok: true},
		}, 3},
		{"in all", Limits{PerHost: 5, Total: 2}, []step{
			{from: "10.0.0.1", ok: true}, {from: "10.0.0.2", ok: true},
			{from: "10.0.0.3", why: "too many connections in all: 2 open, the most this server holds"},
		}, 2},
		{"release makes room", Limits{PerHost: 1, Total: 1}, []step{
			{from: "10.0.0.1", ok: true},
			{from: "10.0.0.1", why: "1 open"},
			{release: 1, ok: true},
			{release: 1, ok: true}, // twice: counted once
			{from: "10.0.0.1", ok: true},
		}, 1},
		{"ports of one host are one host", Limits{PerHost: 1, Total: 5}, []step{
			{from: "::1", ok: true}, {from: "::1", why: "1 open from ::1"},
		}, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := New(tc.limits)
			releases := make([]func(), len(tc.steps))
			for i, s := range tc.steps {
				if s.release > 0 {
					releases[s.release-1]()
					continue
				}
				rel, err := c.Take(tcp(s.from, 1000+i))
				if (err == nil) != s.ok {
					t.Fatalf("step %d: Take from %s: %v", i+1, s.from, err)
				}
				if err != nil && (!errors.Is(err, ErrLimit) || !strings.Contains(err.Error(), s.why)) {
					t.Fatalf("step %d: %v, want ErrLimit saying %q", i+1, err, s.why)
				}
				releases[i] = rel
			}
			if got := c.Open(); got != tc.open {
				t.Errorf("%d open, want %d", got, tc.open)
			}
		})
	}
}

// TestScaled: a server's total is a share of the descriptor limit, and
// one host never gets more than the total.
func TestScaled(t *testing.T) {
	var r syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &r); err != nil {
		t.Skip(err)
	}
	l := Limits{PerHost: 1 << 40, Total: 1 << 40}.Scaled(8)
	if want := int(min(r.Cur/8, 1<<40)); l.Total != want || l.PerHost != want {
		t.Errorf("Scaled(8) = %+v, want both %d (descriptor limit %d)", l, want, r.Cur)
	}
	if l := (Limits{PerHost: 3, Total: 4}).Scaled(8); l.Total > 4 || l.PerHost > 3 {
		t.Errorf("Scaled raised limits: %+v", l)
	}
}

// TestListener: a listener holds at most its limit of connections; the
// next is closed as it is accepted and said once to refused, and a closed
// connection makes room for another.
func TestListener(t *testing.T) {
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	c := New(Limits{PerHost: 2, Total: 2})
	var mu sync.Mutex
	var refusals []string
	l := c.Listener(lis, func(peer string, err error) {
		mu.Lock()
		defer mu.Unlock()
		refusals = append(refusals, err.Error())
	})
	defer l.Close()
	accepted := make(chan net.Conn, 10)
	go func() {
		for {
			conn, err := l.Accept()
			if err != nil {
				close(accepted)
				return
			}
			accepted <- conn
		}
	}()
	dial := func() net.Conn {
		conn, err := net.Dial("tcp", lis.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { conn.Close() })
		return conn
	}
	dial()
	dial()
	first := <-accepted
	<-accepted
	over := dial()
	over.SetReadDeadline(time.Now().Add(time.Minute))
	if _, err := over.Read(make([]byte, 1)); err != io.EOF && !errors.Is(err, syscall.ECONNRESET) {
		t.Fatalf("the connection over the limit: read %v, want it closed", err)
	}
	mu.Lock()
	if len(refusals) != 1 || !strings.Contains(refusals[0], "2 open") {
		t.Errorf("refusals %q, want one saying 2 open", refusals)
	}
	mu.Unlock()
	first.Close()
	if got := c.Open(); got != 1 {
		t.Errorf("%d open after a close, want 1", got)
	}
	dial()
	select {
	case <-accepted:
	case <-time.After(time.Minute):
		t.Fatal("a connection after a close was not accepted")
	}
}

// failing is a listener whose Accept fails n times with err, then accepts
// from its embedded listener.
type failing struct {
	net.Listener
	mu  sync.Mutex
	n   int
	err error
}

func (f *failing) Accept() (net.Conn, error) {
	f.mu.Lock()
	if f.n > 0 {
		f.n--
		f.mu.Unlock()
		return nil, f.err
	}
	f.mu.Unlock()
	return f.Listener.Accept()
}

// TestListenerWaitsOutAcceptErrors: out of descriptors, Accept pauses and
// tries again, saying so once, instead of returning the error (which an
// http.Server logs every 5 ms); other errors are returned.
func TestListenerWaitsOutAcceptErrors(t *testing.T) {
	for _, tc := range []struct {
		name     string
		err      error
		returned bool
	}{
		{"out of descriptors", &net.OpError{Op: "accept", Err: syscall.EMFILE}, false},
		{"aborted", syscall.ECONNABORTED, false},
		{"closed", net.ErrClosed, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			lis, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				t.Fatal(err)
			}
			defer lis.Close()
			said := 0
			l := New(Limits{PerHost: 1, Total: 1}).Listener(&failing{Listener: lis, n: 3, err: tc.err}, func(peer string, err error) { said++ })
			if !tc.returned {
				conn, err := net.Dial("tcp", lis.Addr().String())
				if err != nil {
					t.Fatal(err)
				}
				defer conn.Close()
			}
			conn, err := l.Accept()
			if tc.returned {
				if !errors.Is(err, tc.err) {
					t.Fatalf("Accept: %v, want %v", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatalf("Accept: %v", err)
			}
			conn.Close()
			if said != 1 {
				t.Errorf("said %d times, want once", said)
			}
		})
	}
}
