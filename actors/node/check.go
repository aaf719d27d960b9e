package node

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"syscall"
	"time"
)

// checkTimeout bounds each step of CheckPeer: the dial, the handshake, and
// the wait for the peer's verdict on this node's certificate.
const checkTimeout = 2 * time.Second

// CheckPeer tells whether this node can talk to the actor system at addr,
// for a worker whose learner does not answer: nil when the transports fit
// (both plaintext, or mutual TLS each side accepts), an error wrapping
// ErrTLS when they never will (a certificate refused on either side: by
// another CA, expired, not valid yet, of the wrong key or use; TLS on one
// side only), and any other error when addr cannot be reached now
// (refused, reset, timed out, closed before the handshake: a learner not
// started yet, or gone), which a worker waits out. t is this node's TLS
// (nil: plaintext).
func CheckPeer(addr string, t *TLSConfigs) error {
	if t == nil {
		return checkPlain(addr)
	}
	return checkTLS(addr, t, alpn)
}

// checkTLS dials addr with this node's TLS, offering proto as the
// application protocol (ALPN: alpn at an actor port, membershipALPN at a
// membership port). The peer's certificate is checked as every
// connection checks it, but its verdict is kept rather
// than ending the handshake, so that the peer gets to check this node's
// certificate too and both sides can name what is wrong (nothing is ever
// sent on this connection). Under TLS 1.3 the peer's verdict on this node
// arrives after the client's side of the handshake: it is the first read.
func checkTLS(addr string, t *TLSConfigs, proto string) error {
	var peerProblem error
	cfg := t.Client.Clone()
	cfg.NextProtos = []string{proto}
	verify := cfg.VerifyPeerCertificate
	cfg.VerifyPeerCertificate = func(raw [][]byte, chains [][]*x509.Certificate) error {
		if roots := t.roots(); roots == nil {
			peerProblem = verify(raw, chains)
		} else if err := verifyChain(raw, roots, time.Now()); err != nil {
			peerProblem = fmt.Errorf("%w: the node at %s: its %w", ErrTLS, addr, err)
		}
		return nil
	}
	conn, err := net.DialTimeout("tcp", addr, checkTimeout)
	if err != nil {
		return fmt.Errorf("%s: %w", addr, err)
	}
	defer conn.Close()
	tc := tls.Client(conn, cfg)
	tc.SetDeadline(time.Now().Add(checkTimeout))
	if err := tc.Handshake(); err != nil {
		return tlsProblem(addr, err, own(t))
	}
	tc.SetDeadline(time.Now().Add(checkTimeout))
	_, readErr := tc.Read(make([]byte, 1))
	if peerProblem != nil {
		return peerProblem
	}
	if readErr != nil && !timedOut(readErr) {
		return tlsProblem(addr, readErr, own(t))
	}
	return nil
}

// checkPlain tells a plaintext node whether addr is plaintext too. A
// plaintext gRPC server speaks first (its HTTP/2 settings); a TLS server
// waits for a ClientHello, and answers one without a certificate with a
// refusal.
func checkPlain(addr string) error {
	conn, err := net.DialTimeout("tcp", addr, checkTimeout)
	if err != nil {
		return fmt.Errorf("%s: %w", addr, err)
	}
	conn.SetReadDeadline(time.Now().Add(checkTimeout / 2))
	n, err := conn.Read(make([]byte, 1))
	conn.Close()
	switch {
	case n > 0:
		return nil
	case err != nil && !timedOut(err):
		return fmt.Errorf("%s: %w", addr, err)
	}
	conn, err = net.DialTimeout("tcp", addr, checkTimeout)
	if err != nil {
		return fmt.Errorf("%s: %w", addr, err)
	}
	defer conn.Close()
	tc := tls.Client(conn, &tls.Config{InsecureSkipVerify: true, NextProtos: []string{alpn}})
	tc.SetDeadline(time.Now().Add(checkTimeout))
	err = tc.Handshake()
	if err == nil {
		_, err = tc.Read(make([]byte, 1))
	}
	if _, ok := errors.AsType[tls.RecordHeaderError](err); ok {
		return nil // plaintext after all, a slow one
	}
	if err == nil || errors.Is(tlsProblem(addr, err, nil), ErrTLS) {
		return fmt.Errorf("%w: %s uses mutual TLS: give this node cluster.tls.ca, .cert and .key", ErrTLS, addr)
	}
	return fmt.Errorf("%s: %w", addr, err)
}

// tlsProblem reads a failed TLS handshake or first read with addr: a
// network failure is returned as is (not ErrTLS); anything else is ErrTLS
// naming what does not fit. mine is this node's certificate (nil without
// TLS): a peer's "expired certificate" alert is about it.
func tlsProblem(addr string, err error, mine *x509.Certificate) error {
	if networkFailure(err) {
		return fmt.Errorf("%s: %w", addr, err)
	}
	if errors.Is(err, ErrTLS) {
		return err
	}
	if _, ok := errors.AsType[tls.RecordHeaderError](err); ok {
		return fmt.Errorf("%w: %s does not use TLS: give every node of the cluster cluster.tls.*, or none", ErrTLS, addr)
	}
	if oe, ok := errors.AsType[*net.OpError](err); ok && oe.Op == "remote error" {
		return fmt.Errorf("%w: %s refused this node's certificate: %s", ErrTLS, addr, alertReason(oe.Err.Error(), mine))
	}
	return fmt.Errorf("%w: TLS with %s failed: %v", ErrTLS, addr, err)
}

// alertReason explains a TLS alert a peer sent about this node's
// certificate mine.
func alertReason(alert string, mine *x509.Certificate) string {
	now := time.Now()
	switch {
	case alert == "tls: unknown certificate authority":
		return "it is signed by another CA than the peer's cluster.tls.ca (" + alert + ")"
	case alert == "tls: expired certificate" && mine != nil && now.Before(mine.NotBefore):
		return fmt.Sprintf("it is not valid yet: valid from %s (%s)", stamp(mine.NotBefore), alert)
	case alert == "tls: expired certificate" && mine != nil && now.After(mine.NotAfter):
		return fmt.Sprintf("it expired: valid until %s (%s)", stamp(mine.NotAfter), alert)
	case alert == "tls: expired certificate":
		return "the peer says it expired; is the peer's clock right? (" + alert + ")"
	}
	return alert
}

// own is this node's certificate.
func own(t *TLSConfigs) *x509.Certificate {
	if t.keys == nil {
		return nil
	}
	return t.keys.get().Leaf
}

// networkFailure reports whether err is the network's doing rather than
// TLS's: refused, reset, unreachable, timed out, or closed before the
// handshake completed. A peer starting or going away fails this way.
func networkFailure(err error) bool {
	for _, e := range []error{io.EOF, io.ErrUnexpectedEOF, net.ErrClosed, os.ErrDeadlineExceeded,
		syscall.ECONNREFUSED, syscall.ECONNRESET, syscall.ECONNABORTED, syscall.EPIPE,
		syscall.EHOSTUNREACH, syscall.ENETUNREACH, syscall.ETIMEDOUT} {
		if errors.Is(err, e) {
			return true
		}
	}
	return timedOut(err)
}

// refusalWait bounds NothingListens' dial: a refusal comes back within a
// round trip, so a host that drops the dial (a firewall, a machine that is
// down) costs a worker this much a missed heartbeat, not checkTimeout.
const refusalWait = 500 * time.Millisecond

// NothingListens reports whether nothing accepts connections at addr
// (host:port) now: the connection is refused, so no process holds that
// port (a learner whose run is over, or that was killed). A dial that
// times out, or a port that accepts and never answers (a frozen process),
// is not that: the peer may be slow rather than gone. Nothing is sent on
// the connection, so a node at addr says nothing of it.
func NothingListens(addr string) bool {
	conn, err := net.DialTimeout("tcp", addr, refusalWait)
	if err != nil {
		return errors.Is(err, syscall.ECONNREFUSED)
	}
	conn.Close()
	return false
}

// Unreachable reports whether err says that no route leads to the peer,
// or that a dial timed out: what a worker sees when the address a learner
// advertises is not one it can reach (another network, a NAT), as opposed
// to a learner that refuses or is gone.
func Unreachable(err error) bool {
	return errors.Is(err, syscall.EHOSTUNREACH) || errors.Is(err, syscall.ENETUNREACH) || errors.Is(err, syscall.ETIMEDOUT) || timedOut(err)
}

// timedOut reports whether err is a deadline or timeout.
func timedOut(err error) bool {
	ne, ok := errors.AsType[net.Error](err)
	return ok && ne.Timeout()
}
