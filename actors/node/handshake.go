package node

import (
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"strings"
	"sync"
	"time"

	"google.golang.org/grpc/credentials"

	"github.com/mgrpo/mgrpo/internal/connlimit"
)

// Kinds of refused connections, for notices (one line a minute per peer
// and kind).
const (
	refusedCertificate = "certificate"  // the peer's certificate failed the check (and how)
	refusedNoTLS       = "without TLS"  // a plaintext node, or one without a certificate
	refusedTLS         = "TLS"          // a TLS node at a plaintext server
	refusedOurs        = "refuses ours" // the peer refused this node's certificate
	refusedHandshake   = "handshake"    // any other TLS failure
)

// loggedTLS is the server side of a node's mutual TLS that says why it
// refused a connection: a certificate of another CA, expired, not valid
// yet, signed with the wrong key; no certificate, or no TLS at all; or the
// peer's refusal of this node's certificate. Network failures (a peer
// that hangs up, a port scan) are not refusals and say nothing.
type loggedTLS struct {
	credentials.TransportCredentials
	notes *notices
}

// ServerHandshake implements credentials.TransportCredentials.
func (c loggedTLS) ServerHandshake(raw net.Conn) (net.Conn, credentials.AuthInfo, error) {
	addr := raw.RemoteAddr().String()
	conn, info, err := c.TransportCredentials.ServerHandshake(raw)
	if err != nil {
		if kind, reason, ok := handshakeRefusal(err, time.Now()); ok {
			c.notes.say(addr, kind, "refused a connection from %s: %s", addr, reason)
		}
	}
	return conn, info, err
}

// Clone implements credentials.TransportCredentials.
func (c loggedTLS) Clone() credentials.TransportCredentials {
	return loggedTLS{TransportCredentials: c.TransportCredentials.Clone(), notes: c.notes}
}

// handshakeRefusal reads the error of a server-side TLS handshake: the
// kind of refusal and its reason, or ok false for a network failure.
func handshakeRefusal(err error, now time.Time) (kind, reason string, ok bool) {
	if networkFailure(err) {
		return "", "", false
	}
	if ve, ok := errors.AsType[*tls.CertificateVerificationError](err); ok && len(ve.UnverifiedCertificates) > 0 {
		c := ve.UnverifiedCertificates[0]
		kind, problem := certProblem(c, ve.Err, now)
		return refusedCertificate + ": " + kind, fmt.Sprintf("its certificate %s is %s", subject(c), problem), true
	}
	if _, ok := errors.AsType[tls.RecordHeaderError](err); ok {
		return refusedNoTLS, "it does not speak TLS (a node without cluster.tls.*?)", true
	}
	if oe, ok := errors.AsType[*net.OpError](err); ok && oe.Op == "remote error" {
		return refusedOurs, fmt.Sprintf("it refuses this node's certificate (%v): is it of another cluster.tls.ca, or is one of the clocks off?", oe.Err), true
	}
	msg := err.Error()
	switch {
	case strings.Contains(msg, "didn't provide a certificate"):
		return refusedNoTLS, "it sent no certificate (a node without cluster.tls.*?)", true
	case strings.Contains(msg, "invalid signature by the client certificate"):
		return refusedCertificate, "its handshake is not signed by its certificate's key (the wrong key): " + msg, true
	case strings.Contains(msg, "missing selected ALPN"):
		return refusedHandshake, "it did not offer HTTP/2 (ALPN h2): not a gRPC client", true
	}
	return refusedHandshake, msg, true
}

// limited is the server side of a node's transport that counts the
// connections it holds (connLimits) and closes, with a notice, the ones
// over its limits before their handshake.
type limited struct {
	credentials.TransportCredentials
	conns *connlimit.Counter
	notes *notices
}

// ServerHandshake implements credentials.TransportCredentials.
func (c limited) ServerHandshake(raw net.Conn) (net.Conn, credentials.AuthInfo, error) {
	release, err := c.conns.Take(raw.RemoteAddr())
	if err != nil {
		c.notes.refusedConn("actor")(raw.RemoteAddr().String(), err)
		return nil, nil, err
	}
	conn, info, err := c.TransportCredentials.ServerHandshake(raw)
	if err != nil {
		release()
		return nil, nil, err
	}
	return connlimit.Wrap(conn, release), info, nil
}

// Clone implements credentials.TransportCredentials.
func (c limited) Clone() credentials.TransportCredentials {
	return limited{TransportCredentials: c.TransportCredentials.Clone(), conns: c.conns, notes: c.notes}
}

// loggedPlain is the server side of a plaintext node that says when a TLS
// node talks to it: the first byte a client sends is a TLS handshake
// record (0x16). The gRPC server has sent its settings by then, so the
// TLS node reads them and knows this node does not use TLS.
type loggedPlain struct {
	credentials.TransportCredentials
	notes *notices
}

// ServerHandshake implements credentials.TransportCredentials.
func (c loggedPlain) ServerHandshake(raw net.Conn) (net.Conn, credentials.AuthInfo, error) {
	conn, info, err := c.TransportCredentials.ServerHandshake(raw)
	if err != nil {
		return conn, info, err
	}
	return &sniffed{Conn: conn, notes: c.notes}, info, nil
}

// Clone implements credentials.TransportCredentials.
func (c loggedPlain) Clone() credentials.TransportCredentials {
	return loggedPlain{TransportCredentials: c.TransportCredentials.Clone(), notes: c.notes}
}

// sniffed is a plaintext connection whose first byte is looked at.
type sniffed struct {
	net.Conn
	notes *notices
	once  sync.Once
}

// tlsHandshakeRecord is the first byte of a TLS ClientHello.
const tlsHandshakeRecord = 0x16

// Read implements net.Conn.
func (s *sniffed) Read(b []byte) (int, error) {
	n, err := s.Conn.Read(b)
	if n > 0 {
		s.once.Do(func() {
			if b[0] == tlsHandshakeRecord {
				addr := s.RemoteAddr().String()
				s.notes.say(addr, refusedTLS, "refused a connection from %s: it speaks TLS and this node does not (give every node of the cluster cluster.tls.*, or none)", addr)
			}
		})
	}
	return n, err
}
