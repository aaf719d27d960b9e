package node

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"os"
	"strings"
	"time"
)

// ErrTLS: the TLS files cannot be used, or this node and a peer cannot
// agree on TLS (a certificate refused on either side, TLS on one side
// only): something no retry can mend.
var ErrTLS = errors.New("node: tls")

// alpn is the protocol gRPC negotiates over TLS; a gRPC server hangs up on
// a TLS client that does not offer it.
const alpn = "h2"

// LoadTLS returns mutual TLS for a node from PEM files: the cluster's CA
// certificate and the node's certificate and key (mgrpo-node certs writes
// them). The certificate and key are read again when their files change:
// a renewed certificate takes effect on the node's next connections, no
// restart needed (the CA is read once). Both sides of every connection must present a certificate signed
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
	keys, err := loadKeyPair(certFile, keyFile)
	if err != nil {
		return nil, err
	}
	verify := func(raw [][]byte, _ [][]*x509.Certificate) error {
		if err := verifyChain(raw, pool, time.Now()); err != nil {
			return fmt.Errorf("%w: the peer's %w", ErrTLS, err)
		}
		return nil
	}
	server := &tls.Config{
		MinVersion: tls.VersionTLS13, ClientAuth: tls.RequireAndVerifyClientCert, ClientCAs: pool,
		GetCertificate: func(*tls.ClientHelloInfo) (*tls.Certificate, error) { return keys.get(), nil },
	}
	client := &tls.Config{
		MinVersion: tls.VersionTLS13, NextProtos: []string{alpn},
		GetClientCertificate: func(*tls.CertificateRequestInfo) (*tls.Certificate, error) { return keys.get(), nil },
		// The chain is checked against the CA below; only the host name
		// check of the default verification is skipped.
		InsecureSkipVerify: true, VerifyPeerCertificate: verify,
	}
	return &TLSConfigs{Server: server, Client: client, pool: pool, keys: keys}, nil
}

// Expiring is a warning, for the operator of this node, when its own
// certificate is not valid at now (its peers refuse it) or stops being
// valid within the next period; "" otherwise.
func (t *TLSConfigs) Expiring(now time.Time, within time.Duration) string {
	c := own(t)
	switch {
	case c == nil:
		return ""
	case now.Before(c.NotBefore), now.After(c.NotAfter):
		_, problem := certProblem(c, nil, now)
		return fmt.Sprintf("cluster.tls.cert %s is %s: every peer refuses this node", subject(c), problem)
	case c.NotAfter.Sub(now) < within:
		return fmt.Sprintf("cluster.tls.cert %s expires in %s (%s): peers refuse new connections of this node from then on; renew it in place (mgrpo-node certs --renew): the node reads it again, no restart",
			subject(c), c.NotAfter.Sub(now).Round(time.Minute), stamp(c.NotAfter))
	}
	return ""
}

// verifyChain checks that the peer's certificate (raw, leaf first) chains
// to the CA pool at now; its error reads "certificate … is …".
func verifyChain(raw [][]byte, pool *x509.CertPool, now time.Time) error {
	if len(raw) == 0 {
		return errors.New("certificate is missing")
	}
	certs := make([]*x509.Certificate, len(raw))
	for i, b := range raw {
		c, err := x509.ParseCertificate(b)
		if err != nil {
			return fmt.Errorf("certificate cannot be read: %w", err)
		}
		certs[i] = c
	}
	inter := x509.NewCertPool()
	for _, c := range certs[1:] {
		inter.AddCert(c)
	}
	_, err := certs[0].Verify(x509.VerifyOptions{Roots: pool, Intermediates: inter, CurrentTime: now,
		KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth}})
	if err != nil {
		_, problem := certProblem(certs[0], err, now)
		return fmt.Errorf("certificate %s is %s", subject(certs[0]), problem)
	}
	return nil
}

// certProblem says what is wrong with cert, whose verification failed with
// err: the kind of problem (for notices) and a phrase completing "the
// certificate is …". The dates come first (x509 calls a certificate that
// is not valid yet "expired"), then the CA, the use, the name.
func certProblem(cert *x509.Certificate, err error, now time.Time) (kind, text string) {
	switch {
	case cert != nil && now.Before(cert.NotBefore):
		return "not valid yet", fmt.Sprintf("not valid yet: valid from %s (made for later, or this clock is behind)", stamp(cert.NotBefore))
	case cert != nil && now.After(cert.NotAfter):
		return "expired", fmt.Sprintf("expired: valid until %s", stamp(cert.NotAfter))
	}
	if _, ok := errors.AsType[x509.UnknownAuthorityError](err); ok {
		return "another CA", "signed by another CA than this node's cluster.tls.ca"
	}
	if ci, ok := errors.AsType[x509.CertificateInvalidError](err); ok && ci.Reason == x509.IncompatibleUsage {
		return "usage", "not made for TLS between nodes (its extended key usage)"
	}
	if he, ok := errors.AsType[x509.HostnameError](err); ok {
		return "name", "made for another name: " + he.Error()
	}
	return "refused", "refused: " + err.Error()
}

// stamp formats a certificate date.
func stamp(t time.Time) string { return t.UTC().Format(time.RFC3339) }

// subject names a certificate in a notice: its common name, quoted.
func subject(c *x509.Certificate) string {
	return fmt.Sprintf("%q", strings.ToValidUTF8(c.Subject.CommonName, "?"))
}
