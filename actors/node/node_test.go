package node

import (
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"io"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/remote"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
)

// certsIn writes a CA and 2 node certificates into a fresh directory.
func certsIn(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	if err := WriteCerts(dir, 2, []string{"127.0.0.1", "learner.local"}); err != nil {
		t.Fatal(err)
	}
	return dir
}

func loadNode(t *testing.T, dir string, name string) *TLSConfigs {
	t.Helper()
	c, err := LoadTLS(filepath.Join(dir, "ca.pem"), filepath.Join(dir, name+".pem"), filepath.Join(dir, name+".key"))
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// lockedBuffer is a bytes.Buffer safe for concurrent writes.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// serveTLS serves like a node's gRPC server: each connection is handshaken
// by the node's server credentials (which say why they refuse one, on
// notes), then the server speaks first, as gRPC does. It returns the
// address.
func serveTLS(t *testing.T, cfg *tls.Config, notes *lockedBuffer) string {
	t.Helper()
	creds := loggedTLS{credentials.NewTLS(cfg), newNotices(notes)}
	return serveRaw(t, func(c net.Conn) {
		conn, _, err := creds.ServerHandshake(c)
		if err != nil {
			return
		}
		defer conn.Close()
		conn.Write([]byte{0})
		conn.Read(make([]byte, 1)) // hold it open until the client goes
	})
}

// serveRaw accepts connections on a loopback port and hands each to serve.
func serveRaw(t *testing.T, serve func(net.Conn)) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				serve(c)
			}()
		}
	}()
	return l.Addr().String()
}

func TestWriteCertsKeysArePrivate(t *testing.T) {
	dir := certsIn(t)
	if err := AddNodeCert(dir, "node-9", nil, time.Now().Add(-time.Hour), time.Now().Add(time.Hour)); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"ca.key", "node-1.key", "node-2.key", "node-9.key"} {
		st, err := os.Stat(filepath.Join(dir, name))
		if err != nil || st.Mode().Perm() != 0o600 {
			t.Errorf("%s: mode %v (%v), want 0600", name, st.Mode().Perm(), err)
		}
	}
	if err := WriteCerts(t.TempDir(), 0, nil); err == nil {
		t.Error("WriteCerts with 0 nodes succeeded")
	}
	if err := AddNodeCert(t.TempDir(), "node-1", nil, time.Now(), time.Now().Add(time.Hour)); err == nil {
		t.Error("AddNodeCert without a CA succeeded")
	}
}

// TestCheckPeer: nodes of one CA accept each other. A certificate refused
// on either side (another CA, expired, not valid yet) and TLS on one side
// only are ErrTLS, naming the reason, on one line, and the server says so
// too; a peer that cannot be reached, or hangs up before the handshake,
// is a network error a worker waits out (not ErrTLS).
func TestCheckPeer(t *testing.T) {
	ours, theirs := certsIn(t), certsIn(t)
	now := time.Now()
	if err := AddNodeCert(ours, "expired", nil, now.Add(-48*time.Hour), now.Add(-24*time.Hour)); err != nil {
		t.Fatal(err)
	}
	if err := AddNodeCert(ours, "later", nil, now.Add(24*time.Hour), now.Add(48*time.Hour)); err != nil {
		t.Fatal(err)
	}
	var notes lockedBuffer
	addr := serveTLS(t, loadNode(t, ours, "node-1").Server, &notes)
	closed := serveRaw(t, func(net.Conn) {}) // hangs up before the handshake
	plain := serveRaw(t, func(c net.Conn) {  // speaks first (a settings frame), as gRPC's plaintext server does
		c.Write([]byte{0, 0, 0, 4, 0, 0, 0, 0, 0})
		c.Read(make([]byte, 1))
	})
	gone := closedPort(t)
	tests := []struct {
		name, addr string
		tls        *TLSConfigs
		tlsErr     bool   // ErrTLS; otherwise a network error, or nil when want is ""
		want       string // in the error
		server     string // in the server's notices
	}{
		{"same CA", addr, loadNode(t, ours, "node-2"), false, "", ""},
		{"another CA", addr, loadNode(t, theirs, "node-2"), true, "signed by another CA", `certificate "mgrpo node-2" is signed by another CA`},
		{"expired", addr, loadNode(t, ours, "expired"), true, "it expired: valid until", `certificate "mgrpo expired" is expired: valid until`},
		{"not valid yet", addr, loadNode(t, ours, "later"), true, "it is not valid yet: valid from", `certificate "mgrpo later" is not valid yet`},
		{"no TLS against TLS", addr, nil, true, "uses mutual TLS", "it sent no certificate"},
		{"TLS against plaintext", plain, loadNode(t, ours, "node-2"), true, "does not use TLS", ""},
		{"plaintext against plaintext", plain, nil, false, "", ""},
		{"hangs up, TLS", closed, loadNode(t, ours, "node-2"), false, closed, ""},
		{"hangs up, plaintext", closed, nil, false, closed, ""},
		{"nothing listens", gone, loadNode(t, ours, "node-2"), false, "connection refused", ""},
		{"nothing listens, plaintext", gone, nil, false, "connection refused", ""},
	}
	for _, tc := range tests {
		err := CheckPeer(tc.addr, tc.tls)
		t.Logf("%s: %v", tc.name, err)
		switch {
		case tc.want == "" && err != nil:
			t.Errorf("%s: %v, want nil", tc.name, err)
		case tc.want != "" && (err == nil || errors.Is(err, ErrTLS) != tc.tlsErr || !strings.Contains(err.Error(), tc.want) || strings.Contains(err.Error(), "\n")):
			t.Errorf("%s: %v; want one line with %q (ErrTLS %v)", tc.name, err, tc.want, tc.tlsErr)
		}
		if tc.server != "" && !waitFor(&notes, tc.server) {
			t.Errorf("%s: the server's notices lack %q:\n%s", tc.name, tc.server, notes.String())
		}
	}
	t.Logf("the server said:\n%s", notes.String())
	if strings.Contains(notes.String(), "mgrpo node-2\" is") && !strings.Contains(notes.String(), "another CA") {
		t.Errorf("a good certificate was refused:\n%s", notes.String())
	}
}

// closedPort is a loopback address where nothing listens.
func closedPort(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	return addr
}

// waitFor waits up to 5 s for s to appear in b (a server goroutine writes
// its notice after the client has its answer).
func waitFor(b *lockedBuffer, s string) bool {
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		if strings.Contains(b.String(), s) {
			return true
		}
	}
	return false
}

func TestLoadTLSErrorsNameTheFile(t *testing.T) {
	dir := certsIn(t)
	for _, tc := range []struct{ ca, cert, key, want string }{
		{"missing.pem", "node-1.pem", "node-1.key", "cluster.tls.ca"},
		{"node-1.key", "node-1.pem", "node-1.key", "no PEM certificate"},
		{"ca.pem", "node-1.pem", "node-2.key", "cluster.tls.cert/key"},
	} {
		_, err := LoadTLS(filepath.Join(dir, tc.ca), filepath.Join(dir, tc.cert), filepath.Join(dir, tc.key))
		if !errors.Is(err, ErrTLS) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("LoadTLS(%s, %s, %s) = %v, want ErrTLS naming %q", tc.ca, tc.cert, tc.key, err, tc.want)
		}
	}
}

// TestLoggedPlain: a plaintext node that a TLS node talks to says so,
// naming the peer; a plaintext client says nothing.
func TestLoggedPlain(t *testing.T) {
	var notes lockedBuffer
	creds := loggedPlain{insecure.NewCredentials(), newNotices(&notes)}
	addr := serveRaw(t, func(c net.Conn) {
		conn, _, err := creds.ServerHandshake(c)
		if err != nil {
			return
		}
		conn.Write([]byte{0, 0, 0, 4, 0, 0, 0, 0, 0}) // gRPC's settings frame comes first
		conn.Read(make([]byte, 24))
	})
	if err := CheckPeer(addr, nil); err != nil {
		t.Errorf("plaintext to plaintext: %v", err)
	}
	if notes.String() != "" {
		t.Errorf("a plaintext client was refused: %q", notes.String())
	}
	err := CheckPeer(addr, loadNode(t, certsIn(t), "node-1"))
	if !errors.Is(err, ErrTLS) || !strings.Contains(err.Error(), "does not use TLS") {
		t.Errorf("TLS to plaintext: %v, want ErrTLS saying it does not use TLS", err)
	}
	if !waitFor(&notes, "refused a connection from 127.0.0.1:") || !strings.Contains(notes.String(), "it speaks TLS and this node does not") {
		t.Errorf("the plaintext node's notices: %q", notes.String())
	}
}

// TestStartRetriesTakenPort: a port taken between picking it and the
// actor system binding it is an error, not proto.actor's panic; with no
// port asked for, the node takes another one.
func TestStartRetriesTakenPort(t *testing.T) {
	busy, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer busy.Close()
	taken := busy.Addr().(*net.TCPAddr).Port
	takenThenFree := func(picks *int) func(string, int) (int, error) {
		return func(host string, port int) (int, error) {
			if *picks++; *picks == 1 {
				return taken, nil
			}
			return freePort(host, port)
		}
	}
	alwaysTaken := func(string, int) (int, error) { return taken, nil }
	membership := func() int {
		p, err := freePort("127.0.0.1", 0)
		if err != nil {
			t.Fatal(err)
		}
		return p
	}
	for _, tc := range []struct {
		name    string
		learner bool
		remote  int // Options.RemotePort
		always  bool
		wantErr bool
	}{
		{name: "client takes another port", learner: false},
		{name: "learner takes another port", learner: true},
		{name: "asked-for port taken", remote: taken, always: true, wantErr: true},
		{name: "every try taken", learner: true, always: true, wantErr: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o := Options{Name: "retry", Host: "127.0.0.1", RemotePort: tc.remote, Learner: tc.learner, Seeds: []string{"127.0.0.1:1"}}
			if tc.learner {
				o.Port = membership()
			}
			picks := 0
			pick := takenThenFree(&picks)
			if tc.always {
				pick = alwaysTaken
			}
			n, err := start(o, pick)
			if tc.wantErr {
				if !errors.Is(err, ErrBind) || !strings.Contains(err.Error(), "address already in use") {
					t.Fatalf("start: %v, want ErrBind naming the taken port", err)
				}
				if tc.learner { // the membership port is let go
					l, err := net.Listen("tcp", net.JoinHostPort(o.Host, strconv.Itoa(o.Port)))
					if err != nil {
						t.Fatalf("membership port still held after a failed start: %v", err)
					}
					l.Close()
				}
				return
			}
			if err != nil {
				t.Fatalf("start: %v", err)
			}
			defer n.Stop()
			if picks != 2 || strings.HasSuffix(n.Address(), ":"+strconv.Itoa(taken)) {
				t.Errorf("node at %s after %d picks, want another port than %d on the second", n.Address(), picks, taken)
			}
		})
	}
}

// TestPortsBoundConnections: a learner node's membership port and actor
// port each hold at most maxConnsPerHost connections from one host; the
// next are closed as they come, with one line per port naming the peer,
// and another host still gets in. A client holding 20,000 idle
// connections to the membership port took every descriptor the process
// had, and the run ended when it could not open its next checkpoint.
func TestPortsBoundConnections(t *testing.T) {
	notes := &lockedBuffer{}
	n, err := Start(Options{Name: "flood", Host: "127.0.0.1", Port: freePortNumber(t), Learner: true, MaxMessageBytes: 1 << 20, Notices: notes})
	if err != nil {
		t.Fatal(err)
	}
	defer n.Stop()
	from := func(ip string) *net.Dialer {
		return &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(ip)}, Timeout: 10 * time.Second}
	}
	for _, tc := range []struct{ port, addr string }{
		{"membership", n.Seed()},
		{"actor", n.Address()},
	} {
		t.Run(tc.port, func(t *testing.T) {
			limit := connLimits().PerHost
			var held []net.Conn
			defer func() {
				for _, c := range held {
					c.Close()
				}
			}()
			for range limit + 3 {
				c, err := from("127.0.0.2").Dial("tcp", tc.addr)
				if err != nil {
					t.Fatal(err)
				}
				held = append(held, c)
			}
			if closed := closedOf(held, 3); closed != 3 { // the held ones are closed after handshakeTimeout
				t.Errorf("%d of %d connections from one host closed at once, want the 3 past %d", closed, limit+3, limit)
			}
			line := "refused a connection from 127.0.0.2:"
			if !waitFor(notes, line) || !strings.Contains(notes.String(), "to the "+tc.port+" port: too many connections") {
				t.Errorf("notices %q, want one saying %q… to the %s port", notes.String(), line, tc.port)
			}
			other, err := from("127.0.0.3").Dial("tcp", tc.addr)
			if err != nil {
				t.Fatal(err)
			}
			defer other.Close()
			other.SetReadDeadline(time.Now().Add(500 * time.Millisecond))
			if _, err := other.Read(make([]byte, 1)); !errors.Is(err, os.ErrDeadlineExceeded) && err != nil {
				t.Errorf("another host's connection: %v, want it held open", err)
			}
		})
	}
}

// closedOf is how many of conns the other end closed, once want of them
// are closed (and one look more at the others) or 5 s have passed.
func closedOf(conns []net.Conn, want int) int {
	closed := make([]bool, len(conns))
	n := 0
	for deadline, last := time.Now().Add(5*time.Second), false; !last && time.Now().Before(deadline); {
		last = n >= want
		for i, c := range conns {
			if closed[i] {
				continue
			}
			c.SetReadDeadline(time.Now().Add(5 * time.Millisecond))
			if _, err := io.ReadAll(io.LimitReader(c, 1<<16)); err == nil {
				closed[i] = true
				n++
			}
		}
	}
	return n
}

// freePortNumber is a port nothing listens on now (for a node to take).
func freePortNumber(t *testing.T) int {
	p, err := freePort("127.0.0.1", 0)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// TestStreamsBoundPerConnection: one connection to a node's actor port
// opens at most maxStreams streams at once; the next waits for one to end
// (a peer could open millions, a goroutine each).
func TestStreamsBoundPerConnection(t *testing.T) {
	n, err := Start(Options{Name: "streams", Host: "127.0.0.1", Seeds: []string{"127.0.0.1:1"}, MaxMessageBytes: 1 << 20})
	if err != nil {
		t.Fatal(err)
	}
	defer n.Stop()
	conn, err := grpc.NewClient(n.Address(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	c := remote.NewRemotingClient(conn)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	for range maxStreams {
		if _, err := c.Receive(ctx); err != nil {
			t.Fatal(err)
		}
	}
	next, cancelNext := context.WithTimeout(ctx, time.Second)
	defer cancelNext()
	_, err = c.Receive(next)
	if status.Code(err) != codes.DeadlineExceeded {
		t.Errorf("stream %d: %v, want it to wait (DeadlineExceeded)", maxStreams+1, err)
	}
}

// TestExpiring: a node whose own certificate is expired, not valid yet,
// or ends within the period is warned at start with when; its peers were
// the only ones to say so, by refusing it.
func TestExpiring(t *testing.T) {
	dir := certsIn(t)
	now := time.Now()
	for _, c := range []struct {
		name     string
		from, to time.Time
	}{
		{"expired", now.Add(-48 * time.Hour), now.Add(-24 * time.Hour)},
		{"later", now.Add(24 * time.Hour), now.Add(48 * time.Hour)},
		{"soon", now.Add(-time.Hour), now.Add(5 * time.Hour)},
		{"long", now.Add(-time.Hour), now.Add(30 * 24 * time.Hour)},
	} {
		if err := AddNodeCert(dir, c.name, nil, c.from, c.to); err != nil {
			t.Fatal(err)
		}
	}
	for _, tc := range []struct{ name, want string }{
		{"expired", `cluster.tls.cert "mgrpo expired" is expired: valid until`},
		{"later", `cluster.tls.cert "mgrpo later" is not valid yet: valid from`},
		{"soon", `cluster.tls.cert "mgrpo soon" expires in 5h0m0s (`},
		{"long", ""},
	} {
		got := loadNode(t, dir, tc.name).Expiring(now, 48*time.Hour)
		if tc.want == "" && got != "" || !strings.HasPrefix(got, tc.want) {
			t.Errorf("%s: %q, want %q…", tc.name, got, tc.want)
		}
	}
	// node-1's certificate beside another cluster's CA file (a rotation
	// that dropped the old CA before renewing it).
	other, err := LoadTLS(filepath.Join(certsIn(t), "ca.pem"), filepath.Join(dir, "node-1.pem"), filepath.Join(dir, "node-1.key"))
	if err != nil {
		t.Fatal(err)
	}
	want := `cluster.tls.cert "mgrpo node-1" is signed by none of the CAs in cluster.tls.ca: peers with the same CA file refuse this node`
	if got := other.Expiring(now, 48*time.Hour); !strings.HasPrefix(got, want) {
		t.Errorf("another CA's: %q, want %q…", got, want)
	}
}

// TestRenewedCertificate: a node's certificate renewed in its files while
// it runs is the one its next connections present, both as server and as
// client, and a half-written pair leaves the last whole one in use. The
// files were read once: a short-lived certificate expired under a long
// run, and every worker that joined after was refused.
func TestRenewedCertificate(t *testing.T) {
	dir := certsIn(t)
	server, client := loadNode(t, dir, "node-1"), loadNode(t, dir, "node-2")
	clients := make(chan string, 4) // the serial each connection's client presented
	addr := serveRaw(t, func(c net.Conn) {
		conn := tls.Server(c, server.Server)
		if err := conn.Handshake(); err != nil {
			clients <- "refused: " + err.Error()
			return
		}
		clients <- conn.ConnectionState().PeerCertificates[0].SerialNumber.String()
		conn.Write([]byte{0})
	})
	presented := func() (serverSerial, clientSerial string) {
		t.Helper()
		c, err := tls.Dial("tcp", addr, client.Client)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		c.Read(make([]byte, 1)) // the handshake, both ways
		return c.ConnectionState().PeerCertificates[0].SerialNumber.String(), <-clients
	}
	s0, c0 := presented()
	now := time.Now()
	for _, name := range []string{"node-1", "node-2"} {
		if err := AddNodeCert(dir, name, nil, now.Add(-time.Hour), now.Add(90*24*time.Hour)); err != nil {
			t.Fatal(err)
		}
	}
	s1, c1 := presented()
	if s1 == s0 || c1 == c0 {
		t.Fatalf("serials after renewal: server %s → %s, client %s → %s; want both new", s0, s1, c0, c1)
	}
	if got := own(server).SerialNumber.String(); got != s1 {
		t.Errorf("own certificate %s, want the renewed %s", got, s1)
	}
	if err := os.WriteFile(filepath.Join(dir, "node-1.key"), []byte("half a key"), 0o600); err != nil {
		t.Fatal(err)
	}
	if s2, _ := presented(); s2 != s1 {
		t.Errorf("with a half-written key the server presented %s, want the last whole pair's %s", s2, s1)
	}
}
