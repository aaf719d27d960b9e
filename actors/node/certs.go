package node

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"time"

	"github.com/mgrpo/mgrpo/internal/atomicfile"
)

// CertValidity is how long the certificates of WriteCerts are valid.
const CertValidity = 2 * 365 * 24 * time.Hour

// WriteCerts writes a new cluster CA (ca.pem, ca.key) and n node
// certificates signed by it (node-1.pem, node-1.key, ...) into dir, ECDSA
// P-256, keys readable by the owner only. hosts, if given, are added to
// every node certificate as names (IP addresses or DNS names); nodes
// verify one another by the CA's signature, so they are optional.
func WriteCerts(dir string, n int, hosts []string) error {
	if n < 1 {
		return fmt.Errorf("certs: %d nodes: want at least 1", n)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("certs: %w", err)
	}
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return fmt.Errorf("certs: %w", err)
	}
	ca := &x509.Certificate{
		SerialNumber: serial(), Subject: pkix.Name{CommonName: "mgrpo cluster CA"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(CertValidity),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageCRLSign,
	}
	caDER, err := x509.CreateCertificate(rand.Reader, ca, ca, &caKey.PublicKey, caKey)
	if err != nil {
		return fmt.Errorf("certs: %w", err)
	}
	if err := writePair(dir, "ca", caDER, caKey); err != nil {
		return err
	}
	caCert, err := x509.ParseCertificate(caDER)
	if err != nil {
		return fmt.Errorf("certs: %w", err)
	}
	for i := 1; i <= n; i++ {
		if err := signNode(dir, fmt.Sprintf("node-%d", i), caCert, caKey, hosts, time.Now().Add(-time.Hour), time.Now().Add(CertValidity)); err != nil {
			return err
		}
	}
	return nil
}

// AddNodeCert writes one more node certificate, name.pem and name.key,
// valid from notBefore to notAfter, signed by the CA that WriteCerts left
// in dir (ca.pem, ca.key): a node added to a running cluster, or, in
// tests, a certificate expired or not valid yet.
func AddNodeCert(dir, name string, hosts []string, notBefore, notAfter time.Time) error {
	pair, err := tls.LoadX509KeyPair(filepath.Join(dir, "ca.pem"), filepath.Join(dir, "ca.key"))
	if err != nil {
		return fmt.Errorf("certs: the CA in %s: %w", dir, err)
	}
	key, ok := pair.PrivateKey.(*ecdsa.PrivateKey)
	if !ok {
		return fmt.Errorf("certs: the CA key in %s is not ECDSA", dir)
	}
	return signNode(dir, name, pair.Leaf, key, hosts, notBefore, notAfter)
}

// signNode writes the node certificate name.pem and its key name.key into
// dir, signed by the CA ca.
func signNode(dir, name string, ca *x509.Certificate, caKey *ecdsa.PrivateKey, hosts []string, notBefore, notAfter time.Time) error {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return fmt.Errorf("certs: %w", err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: serial(), Subject: pkix.Name{CommonName: "mgrpo " + name},
		NotBefore: notBefore, NotAfter: notAfter,
		KeyUsage:    x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth},
	}
	for _, h := range hosts {
		if ip := net.ParseIP(h); ip != nil {
			tmpl.IPAddresses = append(tmpl.IPAddresses, ip)
		} else {
			tmpl.DNSNames = append(tmpl.DNSNames, h)
		}
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &key.PublicKey, caKey)
	if err != nil {
		return fmt.Errorf("certs: %w", err)
	}
	return writePair(dir, name, der, key)
}

// writePair writes name.pem (the certificate) and name.key (its key, 0600).
func writePair(dir, name string, der []byte, key *ecdsa.PrivateKey) error {
	kb, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return fmt.Errorf("certs: %w", err)
	}
	if err := atomicfile.WriteBytes(filepath.Join(dir, name+".pem"), pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})); err != nil {
		return fmt.Errorf("certs: %w", err)
	}
	keyPath := filepath.Join(dir, name+".key")
	if err := atomicfile.WriteBytes(keyPath, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kb})); err != nil {
		return fmt.Errorf("certs: %w", err)
	}
	if err := os.Chmod(keyPath, 0o600); err != nil {
		return fmt.Errorf("certs: %w", err)
	}
	return nil
}

// serial is a random 128-bit certificate serial number.
func serial() *big.Int {
	n, _ := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 128))
	return n
}
