package node

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
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
// certificates and the node's certificate and key (mgrpo-node certs writes
// them). Both sides of every connection must present a certificate signed
// by a CA of caFile, which may hold several (a bundle: during a rotation,
// the old CA and the new one). The node is identified by that signature,
// not by a host name: nodes dial one another by the address the learner
// sees, which a certificate made before the cluster started cannot name.
//
// Every file is read again when it changes, no restart needed: a renewed
// certificate and key are presented from the node's next connections on,
// and a changed CA file is what the next handshakes, as server and as
// client, verify the peer against (connections already open stay). A
// file caught half written leaves the last whole one in use.
func LoadTLS(caFile, certFile, keyFile string) (*TLSConfigs, error) {
	cas, err := loadCAPool(caFile)
	if err != nil {
		return nil, err
	}
	keys, err := loadKeyPair(certFile, keyFile)
	if err != nil {
		return nil, err
	}
	t := &TLSConfigs{cas: cas, keys: keys}
	t.Server = t.serverConfig(alpn)
	t.Client = &tls.Config{
		MinVersion: tls.VersionTLS13, NextProtos: []string{alpn},
		GetClientCertificate: func(*tls.CertificateRequestInfo) (*tls.Certificate, error) { return keys.get(), nil },
		// The default verification, against a pool fixed in the config,
		// is replaced by verifyChain against the CA file as it is now:
		// the same checks (chain, dates, key usage) but the host name,
		// which node certificates do not carry. Without a session cache
		// every connection is a full handshake, so this check runs on
		// each (a resumed session would skip it).
		InsecureSkipVerify: true,
		VerifyPeerCertificate: func(raw [][]byte, _ [][]*x509.Certificate) error {
			if err := verifyChain(raw, cas.get(), time.Now()); err != nil {
				return fmt.Errorf("%w: the peer's %w", ErrTLS, err)
			}
			return nil
		},
	}
	return t, nil
}

// serverConfig is the server side of t for the application protocol
// proto (ALPN). Its GetConfigForClient hands each handshake a copy whose
// ClientCAs is the CA file as it is now, so the client's certificate is
// verified by crypto/tls itself, with the alert that tells the client why
// (unknown CA, expired) and the error handshakeRefusal reads. Session
// tickets are off: a session resumed rests on the verification of its
// first handshake, whose CA may have left the file since (nodes do not
// resume anyway). A clone of the result that changes its fields must be
// made anew with serverConfig instead: the hook hands out copies of the
// original.
func (t *TLSConfigs) serverConfig(proto string) *tls.Config {
	base := &tls.Config{
		MinVersion: tls.VersionTLS13, NextProtos: []string{proto},
		ClientAuth: tls.RequireAndVerifyClientCert, SessionTicketsDisabled: true,
		GetCertificate: func(*tls.ClientHelloInfo) (*tls.Certificate, error) { return t.keys.get(), nil },
	}
	cfg := base.Clone()
	cfg.GetConfigForClient = func(*tls.ClientHelloInfo) (*tls.Config, error) {
		c := base.Clone()
		c.ClientCAs = t.cas.get()
		return c, nil
	}
	return cfg
}

// roots is the CA pool peers are verified against now (nil for
// TLSConfigs not made by LoadTLS).
func (t *TLSConfigs) roots() *x509.CertPool {
	if t.cas == nil {
		return nil
	}
	return t.cas.get()
}

// Expiring is a warning, for the operator of this node, when its own
// certificate is not valid at now (its peers refuse it), is signed by
// none of the CAs of its own cluster.tls.ca (peers given the same file
// refuse it: a rotation that dropped the old CA before this node's
// certificate was renewed), or stops being valid within the next period;
// "" otherwise.
func (t *TLSConfigs) Expiring(now time.Time, within time.Duration) string {
	c := own(t)
	switch {
	case c == nil:
		return ""
	case now.Before(c.NotBefore), now.After(c.NotAfter):
		_, problem := certProblem(c, nil, now)
		return fmt.Sprintf("cluster.tls.cert %s is %s: every peer refuses this node", subject(c), problem)
	case t.roots() != nil && verifyChain([][]byte{c.Raw}, t.roots(), now) != nil:
		return fmt.Sprintf("cluster.tls.cert %s is signed by none of the CAs in cluster.tls.ca: peers with the same CA file refuse this node; renew it with the CA that signs now (mgrpo-node certs --renew)",
			subject(c))
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
