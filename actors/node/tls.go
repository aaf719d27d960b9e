package node

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"os"
	"strings"
	"time"
)

// ErrTLS: the TLS files cannot be used.
var ErrTLS = errors.New("node: tls")

// LoadTLS returns mutual TLS for a node from PEM files: the cluster's CA
// certificate and the node's certificate and key (mgrpo-node certs writes
// them). Both sides of every connection must present a certificate signed
// by that CA. The node is identified by that signature, not by a host
// name: nodes dial one another by the address the learner sees, which a
// certificate made before the cluster started cannot name.
func LoadTLS(caFile, certFile, keyFile string) (*TLSConfigs, error) {
	caPEM, err := os.ReadFile(caFile)
	if err != nil {
		return nil, fmt.Errorf("%w: cluster.tls.ca: %w", ErrTLS, err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(caPEM) {
		return nil, fmt.Errorf("%w: cluster.tls.ca %s: no PEM certificate in it", ErrTLS, caFile)
	}
	cert, err := tls.LoadX509KeyPair(certFile, keyFile)
	if err != nil {
		return nil, fmt.Errorf("%w: cluster.tls.cert/key %s, %s: %w", ErrTLS, certFile, keyFile, err)
	}
	verify := func(raw [][]byte, _ [][]*x509.Certificate) error { return verifyChain(raw, pool) }
	server := &tls.Config{
		MinVersion: tls.VersionTLS13, Certificates: []tls.Certificate{cert},
		ClientAuth: tls.RequireAndVerifyClientCert, ClientCAs: pool,
	}
	client := &tls.Config{
		MinVersion: tls.VersionTLS13, Certificates: []tls.Certificate{cert},
		// The chain is checked against the CA below; only the host name
		// check of the default verification is skipped.
		InsecureSkipVerify: true, VerifyPeerCertificate: verify,
	}
	return &TLSConfigs{Server: server, Client: client}, nil
}

// verifyChain checks that the peer's certificate chains to the CA pool.
func verifyChain(raw [][]byte, pool *x509.CertPool) error {
	if len(raw) == 0 {
		return fmt.Errorf("%w: the peer sent no certificate", ErrTLS)
	}
	certs := make([]*x509.Certificate, len(raw))
	for i, b := range raw {
		c, err := x509.ParseCertificate(b)
		if err != nil {
			return fmt.Errorf("%w: peer certificate: %w", ErrTLS, err)
		}
		certs[i] = c
	}
	inter := x509.NewCertPool()
	for _, c := range certs[1:] {
		inter.AddCert(c)
	}
	_, err := certs[0].Verify(x509.VerifyOptions{Roots: pool, Intermediates: inter,
		KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth}})
	if err != nil {
		return fmt.Errorf("%w: peer certificate not signed by the cluster's CA: %w", ErrTLS, err)
	}
	return nil
}

// CheckPeer tells whether this node's transport security fits the actor
// system at addr: nil when both use mutual TLS that accepts the other, or
// both plaintext; otherwise an ErrTLS saying what does not fit, for the
// one line a node prints when it cannot join. t is this node's TLS (nil:
// plaintext).
func CheckPeer(addr string, t *TLSConfigs) error {
	d := &net.Dialer{Timeout: 2 * time.Second}
	if t != nil {
		conn, err := tls.DialWithDialer(d, "tcp", addr, t.Client)
		if err != nil {
			return fmt.Errorf("%w: mutual TLS with %s failed (is its certificate signed by this node's cluster.tls.ca, and this node's by its?): %v", ErrTLS, addr, err)
		}
		// The server checks this node's certificate after the handshake
		// completes on the client side: a refusal arrives on the first read.
		conn.SetReadDeadline(time.Now().Add(time.Second))
		_, err = conn.Read(make([]byte, 1))
		conn.Close()
		if err != nil && !errors.Is(err, os.ErrDeadlineExceeded) {
			return fmt.Errorf("%w: %s refused this node's certificate (signed by another CA?): %v", ErrTLS, addr, err)
		}
		return nil
	}
	conn, err := tls.DialWithDialer(d, "tcp", addr, &tls.Config{InsecureSkipVerify: true})
	if err == nil {
		conn.Close()
		return fmt.Errorf("%w: %s uses mutual TLS: give this node cluster.tls.ca, .cert and .key", ErrTLS, addr)
	}
	if strings.Contains(err.Error(), "certificate required") || strings.Contains(err.Error(), "handshake failure") {
		return fmt.Errorf("%w: %s uses mutual TLS: give this node cluster.tls.ca, .cert and .key", ErrTLS, addr)
	}
	return nil
}
