package node

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
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
	caCert, caKey, err := newCA()
	if err != nil {
		return err
	}
	if err := writePair(dir, "ca", caCert.Raw, caKey); err != nil {
		return err
	}
	for i := 1; i <= n; i++ {
		if err := signNode(dir, fmt.Sprintf("node-%d", i), caCert, caKey, hosts, time.Now().Add(-time.Hour), time.Now().Add(CertValidity)); err != nil {
			return err
		}
	}
	return nil
}

// newCA makes a cluster CA: its certificate, valid for CertValidity and
// named after the time it was made (the old CA and the new one of a
// rotation tell apart), and its key.
func newCA() (*x509.Certificate, *ecdsa.PrivateKey, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, fmt.Errorf("certs: %w", err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: serial(), Subject: pkix.Name{CommonName: "mgrpo cluster CA " + time.Now().UTC().Format(time.RFC3339)},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(CertValidity),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageCRLSign,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return nil, nil, fmt.Errorf("certs: %w", err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, nil, fmt.Errorf("certs: %w", err)
	}
	return cert, key, nil
}

// AddNodeCert writes one more node certificate, name.pem and name.key,
// valid from notBefore to notAfter, signed by the CA that WriteCerts or
// RotateCA left in dir (ca.key, and its certificate in ca.pem): a node
// added to a running cluster, a certificate renewed (during a rotation,
// by the new CA), or, in tests, one expired or not valid yet.
func AddNodeCert(dir, name string, hosts []string, notBefore, notAfter time.Time) error {
	cas, signer, key, err := DirCA(dir)
	if err != nil {
		return err
	}
	return signNode(dir, name, cas[signer], key, hosts, notBefore, notAfter)
}

// DirCA reads the CA in dir: every certificate of ca.pem (one, or during
// a rotation the new CA's and the old ones'), which of them is the
// signer, the one of ca.key, and that key.
func DirCA(dir string) (cas []*x509.Certificate, signer int, key *ecdsa.PrivateKey, err error) {
	fail := func(err error) ([]*x509.Certificate, int, *ecdsa.PrivateKey, error) {
		return nil, 0, nil, fmt.Errorf("certs: the CA in %s: %w", dir, err)
	}
	if cas, err = ReadCerts(filepath.Join(dir, "ca.pem")); err != nil {
		return fail(err)
	}
	b, err := os.ReadFile(filepath.Join(dir, "ca.key"))
	if err != nil {
		return fail(err)
	}
	if key, err = parseECKey(b); err != nil {
		return fail(fmt.Errorf("ca.key: %w", err))
	}
	for i, c := range cas {
		if pub, ok := c.PublicKey.(*ecdsa.PublicKey); ok && pub.Equal(&key.PublicKey) {
			return cas, i, key, nil
		}
	}
	return fail(errors.New("ca.key is the key of no certificate in ca.pem"))
}

// parseECKey reads an ECDSA private key from PEM: SEC 1 (EC PRIVATE KEY,
// as writePair writes it) or PKCS #8 (PRIVATE KEY, as other CA tooling
// may).
func parseECKey(b []byte) (*ecdsa.PrivateKey, error) {
	block, _ := pem.Decode(b)
	switch {
	case block == nil:
		return nil, errors.New("not a PEM private key")
	case block.Type == "EC PRIVATE KEY":
		return x509.ParseECPrivateKey(block.Bytes)
	}
	k, err := x509.ParsePKCS8PrivateKey(block.Bytes)
	if err != nil {
		return nil, err
	}
	key, ok := k.(*ecdsa.PrivateKey)
	if !ok {
		return nil, fmt.Errorf("a %T, not an ECDSA key", k)
	}
	return key, nil
}

// RotateCA writes into into a new CA: its key as ca.key, and ca.pem the
// bundle of its certificate and every one of from/ca.pem (the old CA), so
// that nodes given that file trust both while their certificates are
// renewed by the new one (AddNodeCert). It returns the new CA.
func RotateCA(from, into string) (*x509.Certificate, error) {
	old, err := ReadCerts(filepath.Join(from, "ca.pem"))
	if err != nil {
		return nil, fmt.Errorf("certs: the CA in %s: %w", from, err)
	}
	ca, key, err := newCA()
	if err != nil {
		return nil, err
	}
	if err := writePair(into, "ca", ca.Raw, key); err != nil {
		return nil, err
	}
	return ca, writeCerts(filepath.Join(into, "ca.pem"), append([]*x509.Certificate{ca}, old...))
}

// DropOldCAs leaves in dir/ca.pem the certificate of ca.key alone: the
// last step of a rotation, once every node's certificate is the new CA's.
// It returns the certificates dropped.
func DropOldCAs(dir string) ([]*x509.Certificate, error) {
	cas, signer, _, err := DirCA(dir)
	if err != nil {
		return nil, err
	}
	dropped := append(cas[:signer:signer], cas[signer+1:]...)
	return dropped, writeCerts(filepath.Join(dir, "ca.pem"), cas[signer:signer+1])
}

// writeCerts writes certs into the PEM file name, in one rename.
func writeCerts(name string, certs []*x509.Certificate) error {
	var b []byte
	for _, c := range certs {
		b = append(b, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: c.Raw})...)
	}
	if err := atomicfile.WriteBytes(name, b); err != nil {
		return fmt.Errorf("certs: %w", err)
	}
	return nil
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
