package node

import (
	"bytes"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"os"
	"sync"
)

// caPool is the cluster's CA certificates (cluster.tls.ca), read again
// from their file when it changes, so that a CA added to the file (a
// rotation's new CA beside the old one) or dropped from it is what the
// node's next handshakes verify peers against, with no restart. The file
// may hold several CA certificates (a bundle): each one is trusted. A file
// that cannot be read whole, say half written, leaves the pool in use in
// place until a whole one is there. Safe for concurrent use.
type caPool struct {
	file string

	mu    sync.Mutex
	pool  *x509.CertPool
	stamp fileStamp // of file when pool was read
}

// loadCAPool reads the pool from file.
func loadCAPool(file string) (*caPool, error) {
	stamp := stampOf(file)
	pool, err := readCAs(file)
	if err != nil {
		return nil, fmt.Errorf("%w: cluster.tls.ca: %w", ErrTLS, err)
	}
	return &caPool{file: file, pool: pool, stamp: stamp}, nil
}

// get is the pool to verify peers against now: read again when the file
// changed since it was last read, and whole.
func (c *caPool) get() *x509.CertPool {
	stamp := stampOf(c.file)
	c.mu.Lock()
	defer c.mu.Unlock()
	if stamp == c.stamp || stamp == (fileStamp{}) {
		return c.pool
	}
	if pool, err := readCAs(c.file); err == nil {
		c.pool, c.stamp = pool, stamp
	}
	return c.pool
}

// readCAs reads every certificate of the PEM file name into a pool. Other
// PEM blocks (a key) and text between blocks are passed over, as
// x509.CertPool.AppendCertsFromPEM does; but a certificate that does not
// parse, or a block cut short (a file caught while it is written), is an
// error rather than a smaller pool.
func readCAs(name string) (*x509.CertPool, error) {
	rest, err := os.ReadFile(name)
	if err != nil {
		return nil, err
	}
	pool, n := x509.NewCertPool(), 0
	for {
		var block *pem.Block
		block, rest = pem.Decode(rest)
		if block == nil {
			break
		}
		if block.Type != "CERTIFICATE" {
			continue
		}
		cert, err := x509.ParseCertificate(block.Bytes)
		if err != nil {
			return nil, fmt.Errorf("%s: certificate %d cannot be read: %w", name, n+1, err)
		}
		pool.AddCert(cert)
		n++
	}
	switch {
	case bytes.Contains(rest, []byte("-----BEGIN")):
		return nil, fmt.Errorf("%s: a PEM block cut short after %d certificates (a file still being written?)", name, n)
	case n == 0:
		return nil, fmt.Errorf("%s: %w", name, errNoCA)
	}
	return pool, nil
}

// errNoCA: a CA file without a certificate.
var errNoCA = errors.New("no PEM certificate in it")
