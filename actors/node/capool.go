package node

import (
	"bytes"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
)

// caPool is the cluster's CA certificates (cluster.tls.ca), read again
// from their file when it changes, so that a CA added to the file (a
// rotation's new CA beside the old one) or dropped from it is what the
// node's next handshakes verify peers against, with no restart. The file
// may hold several CA certificates (a bundle): each one is trusted. A file
// that cannot be read whole, say half written, leaves the pool in use in
// place until a whole one is there. Safe for concurrent use.
type caPool struct {
	file  string
	notes atomic.Pointer[notices] // where a change of the file is said (the node's; nil: nowhere)

	mu    sync.Mutex
	pool  *x509.CertPool
	stamp fileStamp // of file when pool was read
}

// loadCAPool reads the pool from file.
func loadCAPool(file string) (*caPool, error) {
	stamp := stampOf(file)
	cas, err := ReadCerts(file)
	if err != nil {
		return nil, fmt.Errorf("%w: cluster.tls.ca: %w", ErrTLS, err)
	}
	return &caPool{file: file, pool: poolOf(cas), stamp: stamp}, nil
}

// get is the pool to verify peers against now: read again when the file
// changed since it was last read, and whole. Either outcome of a read
// again is a notice: the CAs now trusted, or why the last ones still are.
func (c *caPool) get() *x509.CertPool {
	stamp := stampOf(c.file)
	c.mu.Lock()
	defer c.mu.Unlock()
	if stamp == c.stamp || stamp == (fileStamp{}) {
		return c.pool
	}
	cas, err := ReadCerts(c.file)
	if err != nil {
		c.say("unreadable", "cluster.tls.ca %s changed but cannot be used (%v): peers are verified against the CAs read before until it can", c.file, err)
		return c.pool
	}
	c.pool, c.stamp = poolOf(cas), stamp
	names := make([]string, len(cas))
	for i, ca := range cas {
		names[i] = subject(ca)
	}
	c.say("read "+strings.Join(names, ", "), "cluster.tls.ca %s read again: peers are verified against %s from now on",
		c.file, strings.Join(names, " and "))
	return c.pool
}

// say writes a notice about the CA file, at most one a minute of a kind.
func (c *caPool) say(kind, format string, args ...any) {
	if n := c.notes.Load(); n != nil {
		n.say("cluster.tls.ca", "CA file "+kind, format, args...)
	}
}

// poolOf is a pool of cas.
func poolOf(cas []*x509.Certificate) *x509.CertPool {
	pool := x509.NewCertPool()
	for _, ca := range cas {
		pool.AddCert(ca)
	}
	return pool
}

// ReadCerts reads every certificate of the PEM file name, in order (a CA
// bundle). Other PEM blocks (a key) and text between blocks are passed
// over, as x509.CertPool.AppendCertsFromPEM does; but a file without a
// certificate, a certificate that does not parse, or a block cut short (a
// file caught while it is written) is an error rather than fewer
// certificates.
func ReadCerts(name string) ([]*x509.Certificate, error) {
	rest, err := os.ReadFile(name)
	if err != nil {
		return nil, err
	}
	var certs []*x509.Certificate
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
			return nil, fmt.Errorf("%s: certificate %d cannot be read: %w", name, len(certs)+1, err)
		}
		certs = append(certs, cert)
	}
	switch {
	case bytes.Contains(rest, []byte("-----BEGIN")):
		return nil, fmt.Errorf("%s: a PEM block cut short after %s (a file still being written?)", name, plural(len(certs), "certificate"))
	case len(certs) == 0:
		return nil, fmt.Errorf("%s: %w", name, errNoCA)
	}
	return certs, nil
}

// plural is "1 certificate", "2 certificates".
func plural(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return strconv.Itoa(n) + " " + noun + "s"
}

// errNoCA: a CA file without a certificate.
var errNoCA = errors.New("no PEM certificate in it")
