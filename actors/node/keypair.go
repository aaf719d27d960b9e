package node

import (
	"crypto/tls"
	"fmt"
	"os"
	"sync"
	"time"
)

// keyPair is a node's certificate and key, read again from their files
// when either changes, so that a certificate renewed under a running node
// (short-lived certificates, replaced before they expire) is the one its
// next connections present. A pair that cannot be read, say half written,
// leaves the one in use in place until a whole one is there. Safe for
// concurrent use.
type keyPair struct {
	certFile, keyFile string

	mu    sync.Mutex
	cert  *tls.Certificate
	stamp [2]fileStamp // of certFile and keyFile when cert was read
}

// fileStamp is what tells that a file changed: its size and modification
// time, and where the system tells them (fileid_linux.go) its inode and
// change time, which a file put in its place by a rename (kubectl's
// secret volumes, rsync, an editor's save) or copied with its old
// modification time (cp -p) changes although a renewed certificate often
// has the size of the old one.
type fileStamp struct {
	size int64
	mod  time.Time
	id   fileID
}

// stampOf is name's stamp (zero when it cannot be read).
func stampOf(name string) fileStamp {
	fi, err := os.Stat(name)
	if err != nil {
		return fileStamp{}
	}
	return fileStamp{size: fi.Size(), mod: fi.ModTime(), id: identity(fi)}
}

// loadKeyPair reads the pair from certFile and keyFile.
func loadKeyPair(certFile, keyFile string) (*keyPair, error) {
	k := &keyPair{certFile: certFile, keyFile: keyFile}
	stamp := [2]fileStamp{stampOf(certFile), stampOf(keyFile)}
	cert, err := tls.LoadX509KeyPair(certFile, keyFile)
	if err != nil {
		return nil, fmt.Errorf("%w: cluster.tls.cert/key %s, %s: %w", ErrTLS, certFile, keyFile, err)
	}
	k.cert, k.stamp = &cert, stamp
	return k, nil
}

// get is the pair to present now: read again when a file changed since it
// was last read, and whole.
func (k *keyPair) get() *tls.Certificate {
	stamp := [2]fileStamp{stampOf(k.certFile), stampOf(k.keyFile)}
	k.mu.Lock()
	defer k.mu.Unlock()
	if stamp == k.stamp || stamp[0] == (fileStamp{}) || stamp[1] == (fileStamp{}) {
		return k.cert
	}
	if cert, err := tls.LoadX509KeyPair(k.certFile, k.keyFile); err == nil {
		k.cert, k.stamp = &cert, stamp
	}
	return k.cert
}
