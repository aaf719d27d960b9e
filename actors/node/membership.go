package node

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"sync"
	"time"

	"github.com/asynkron/protoactor-go/cluster"
)

// Membership: a learner node serves what it is (memberPath, a member
// document) on its membership port, and every node polls its seeds' ports
// each refresh for the members it should know. Under mutual TLS the port
// speaks HTTPS with the same certificates as the actor traffic, so a node
// outside the cluster learns nothing of it and cannot pass for its
// learner.
const (
	memberPath     = "/_health"
	membershipALPN = "http/1.1"
	// maxMemberBytes bounds the member document a node reads.
	maxMemberBytes = 1 << 20
	// plainRefusal is what the membership port under TLS answers a
	// plaintext HTTP request with, so that the client can say why.
	plainRefusal = "this membership port uses mutual TLS"
)

// member is the document a learner's membership port answers with (the
// names of proto.actor's automanaged provider, which this replaces, less
// its own port, which no node reads).
type member struct {
	ID          string   `json:"id"`
	Address     string   `json:"address"` // host of the actor system, as advertised
	Port        int      `json:"port"`    // port of the actor system
	Kinds       []string `json:"kinds"`
	ClusterName string   `json:"cluster_name"`
}

// membership is a node's cluster provider (cluster.ClusterProvider): on a
// learner it serves the node's member document on lis; on every node it
// polls seeds each refresh and publishes the members of its cluster that
// answer. When no seed answers the known members stay as they are (a
// worker finds its learner gone by its heartbeats), as proto.actor's
// automanaged provider did.
type membership struct {
	name   string
	seeds  []string
	client *http.Client
	server *http.Server // nil on nodes that are not learners
	lis    net.Listener
	self   func() member

	stopOnce sync.Once
	ctx      context.Context // ends with Shutdown: a poll in flight ends too
	stop     context.CancelFunc
	polling  sync.WaitGroup
}

// newMembership returns the provider of a node of cluster name polling
// seeds, with t's TLS (nil: plaintext). A learner's lis and self serve its
// member document; both are nil on other nodes.
func newMembership(name string, seeds []string, t *TLSConfigs, lis net.Listener, self func() member, notes *notices) *membership {
	m := &membership{name: name, seeds: seeds, client: memberClient(t, true), lis: lis, self: self}
	m.ctx, m.stop = context.WithCancel(context.Background())
	if lis != nil {
		mux := http.NewServeMux()
		mux.HandleFunc("GET "+memberPath, m.serveMember)
		m.server = &http.Server{Handler: mux, ReadHeaderTimeout: handshakeTimeout, IdleTimeout: httpIdleTimeout,
			ErrorLog: quietLog(), MaxHeaderBytes: 16 << 10}
		m.lis = memberListener(lis, t, notes)
	}
	return m
}

// quietLog drops the HTTP server's own log lines: the node says what
// matters itself, once a minute at most.
func quietLog() *log.Logger { return log.New(io.Discard, "", 0) }

// serveMember answers the node's member document.
func (m *membership) serveMember(w http.ResponseWriter, _ *http.Request) {
	w.Header().Set("Content-Type", "application/json")
	json.NewEncoder(w).Encode(m.self())
}

// StartMember implements cluster.ClusterProvider: it serves the member
// document and starts polling.
func (m *membership) StartMember(c *cluster.Cluster) error {
	if m.server != nil {
		go m.server.Serve(m.lis)
	}
	return m.StartClient(c)
}

// StartClient implements cluster.ClusterProvider: it starts polling.
func (m *membership) StartClient(c *cluster.Cluster) error {
	m.polling.Go(func() {
		for {
			if members, ok := m.poll(); ok {
				c.MemberList.UpdateClusterTopology(members)
			}
			select {
			case <-m.ctx.Done():
				return
			case <-time.After(refresh):
			}
		}
	})
	return nil
}

// Shutdown implements cluster.ClusterProvider: it stops serving and
// polling. Safe to call more than once.
func (m *membership) Shutdown(bool) error {
	m.stopOnce.Do(func() {
		m.stop()
		if m.server != nil {
			m.server.Close()
		}
		m.polling.Wait()
		m.client.CloseIdleConnections()
	})
	return nil
}

// poll asks every seed at once for its member document and returns the
// members of this node's cluster among the answers; ok is false when no
// seed answered.
func (m *membership) poll() (members cluster.Members, ok bool) {
	answers := make([]*member, len(m.seeds))
	var wg sync.WaitGroup
	for i, seed := range m.seeds {
		wg.Go(func() {
			ctx, cancel := context.WithTimeout(m.ctx, checkTimeout)
			defer cancel()
			if a, err := fetchMember(ctx, m.client, seed); err == nil {
				answers[i] = a
			}
		})
	}
	wg.Wait()
	for _, a := range answers {
		if a == nil {
			continue
		}
		ok = true
		if a.ClusterName == m.name && a.ID != "" {
			members = append(members, &cluster.Member{Id: a.ID, Host: a.Address, Port: int32(a.Port), Kinds: a.Kinds})
		}
	}
	return members, ok
}

// errPlainAtTLS is a plaintext request's answer from a membership port
// under TLS.
var errPlainAtTLS = errors.New(plainRefusal)

// answerError is an answer of a membership port that is not a member
// document.
type answerError string

// Error implements error.
func (e answerError) Error() string { return string(e) }

// fetchMember asks the membership port at seed (host:port) for its member
// document, with client (memberClient's: HTTPS when it has TLS). Errors: the client's (the dial, TLS), errPlainAtTLS, or one
// saying the answer is not a member document (answerError: an HTTP status,
// not JSON).
func fetchMember(ctx context.Context, client *http.Client, seed string) (*member, error) {
	scheme := "http"
	if client.Transport.(*http.Transport).TLSClientConfig != nil { // memberClient's, with TLS
		scheme = "https"
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, scheme+"://"+seed+memberPath, nil)
	if err != nil {
		return nil, fmt.Errorf("not HOST:PORT: %w", err)
	}
	resp, err := client.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	body := io.LimitReader(resp.Body, maxMemberBytes)
	if resp.StatusCode != http.StatusOK {
		if b, _ := io.ReadAll(io.LimitReader(body, 256)); resp.StatusCode == http.StatusBadRequest && string(b) == plainRefusal+"\n" {
			return nil, errPlainAtTLS
		}
		return nil, answerError(fmt.Sprintf("answers HTTP %d: not a learner's membership port (its cluster.port)", resp.StatusCode))
	}
	var a member
	if err := json.NewDecoder(body).Decode(&a); err != nil || a.ID == "" {
		return nil, answerError("answers, but not as a learner's membership port (its cluster.port) does")
	}
	return &a, nil
}

// memberClient is the HTTP client of membership ports, with t's TLS (nil:
// plaintext), without a proxy (seeds are dialled directly, whatever
// HTTP_PROXY says); keep says whether it keeps its connection to a seed
// between requests (the poller does; a one-off probe does not).
func memberClient(t *TLSConfigs, keep bool) *http.Client {
	tr := &http.Transport{
		DialContext:         (&net.Dialer{Timeout: checkTimeout}).DialContext,
		TLSHandshakeTimeout: checkTimeout,
		MaxIdleConnsPerHost: 1,
		IdleConnTimeout:     httpIdleTimeout,
		DisableKeepAlives:   !keep,
	}
	if t != nil {
		tr.TLSClientConfig = t.Client.Clone()
		tr.TLSClientConfig.NextProtos = []string{membershipALPN}
	}
	return &http.Client{Transport: tr, Timeout: checkTimeout}
}

// memberListener is lis as the membership port serves it: plaintext
// connections whose first byte is a TLS handshake are said (the node does
// not use TLS, the peer does), or, under t's TLS, handshaken before they
// are served.
func memberListener(lis net.Listener, t *TLSConfigs, notes *notices) net.Listener {
	if t == nil {
		return sniffing{lis, notes}
	}
	h := &handshaking{Listener: lis, cfg: t.serverConfig(membershipALPN), notes: notes,
		conns: make(chan net.Conn), errs: make(chan error, 1), done: make(chan struct{})}
	return h
}

// sniffing is a plaintext listener whose connections say a TLS peer.
type sniffing struct {
	net.Listener
	notes *notices
}

// Accept implements net.Listener.
func (s sniffing) Accept() (net.Conn, error) {
	c, err := s.Listener.Accept()
	if err != nil {
		return nil, err
	}
	return &sniffed{Conn: c, notes: s.notes}, nil
}

// handshaking is a listener under mutual TLS that completes each
// connection's handshake, in a goroutine of its own, before Accept hands it
// on: a refused one is said as the actor port says it, and a plaintext
// HTTP request is answered with plainRefusal.
type handshaking struct {
	net.Listener
	cfg   *tls.Config
	notes *notices
	conns chan net.Conn
	errs  chan error
	done  chan struct{}

	start, once sync.Once
}

// accept hands each accepted connection to a handshake until the
// listener fails or is closed.
func (h *handshaking) accept() {
	for {
		c, err := h.Listener.Accept()
		if err != nil {
			h.errs <- err
			return
		}
		go h.handshake(c)
	}
}

// handshake completes c's TLS handshake within handshakeTimeout and hands
// the connection to Accept, or says why it was refused and closes it.
func (h *handshaking) handshake(c net.Conn) {
	peer := c.RemoteAddr().String()
	tc := tls.Server(c, h.cfg)
	tc.SetDeadline(time.Now().Add(handshakeTimeout))
	if err := tc.Handshake(); err != nil {
		if re, ok := errors.AsType[tls.RecordHeaderError](err); ok && re.Conn != nil && looksLikeHTTP(re.RecordHeader) {
			io.WriteString(re.Conn, "HTTP/1.0 400 Bad Request\r\nContent-Type: text/plain\r\nConnection: close\r\n\r\n"+plainRefusal+"\n")
		}
		if kind, reason, ok := handshakeRefusal(err, time.Now()); ok {
			h.notes.say(peer, kind, "refused a connection from %s to the membership port: %s", peer, reason)
		}
		c.Close()
		return
	}
	tc.SetDeadline(time.Time{})
	select {
	case h.conns <- tc:
	case <-h.done:
		tc.Close()
	}
}

// looksLikeHTTP reports whether the first bytes of a connection are an
// HTTP request line's.
func looksLikeHTTP(hdr [5]byte) bool {
	switch string(hdr[:]) {
	case "GET /", "HEAD ", "POST ", "PUT /", "OPTIO":
		return true
	}
	return false
}

// Accept implements net.Listener: the next connection whose handshake
// succeeded.
func (h *handshaking) Accept() (net.Conn, error) {
	h.start.Do(func() { go h.accept() }) // not before: a node that fails to start leaves lis to the next try
	select {
	case c := <-h.conns:
		return c, nil
	case err := <-h.errs:
		h.errs <- err // every later Accept fails the same way
		return nil, err
	case <-h.done:
		return nil, net.ErrClosed
	}
}

// Close implements net.Listener.
func (h *handshaking) Close() error {
	h.once.Do(func() { close(h.done) })
	return h.Listener.Close()
}
