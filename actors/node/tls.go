package node

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"os"
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
