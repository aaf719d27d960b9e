package node

import (
	"crypto/tls"
	"errors"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// certsIn writes a CA and 2 node certificates into a fresh directory.
func certsIn(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	if err := WriteCerts(dir, 2, []string{"127.0.0.1", "learner.local"}); err != nil {
		t.Fatal(err)
	}
	return dir
}

func loadNode(t *testing.T, dir string, i string) *TLSConfigs {
	t.Helper()
	c, err := LoadTLS(filepath.Join(dir, "ca.pem"), filepath.Join(dir, "node-"+i+".pem"), filepath.Join(dir, "node-"+i+".key"))
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// serveTLS accepts TLS connections with cfg on a loopback port and
// completes each handshake; it returns the address.
func serveTLS(t *testing.T, cfg *tls.Config) string {
	t.Helper()
	l, err := tls.Listen("tcp", "127.0.0.1:0", cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				if c.(*tls.Conn).Handshake() == nil {
					c.Read(make([]byte, 1)) // hold it open until the client goes
				}
			}()
		}
	}()
	return l.Addr().String()
}

func TestWriteCertsKeysArePrivate(t *testing.T) {
	dir := certsIn(t)
	for _, name := range []string{"ca.key", "node-1.key", "node-2.key"} {
		st, err := os.Stat(filepath.Join(dir, name))
		if err != nil || st.Mode().Perm() != 0o600 {
			t.Errorf("%s: mode %v (%v), want 0600", name, st.Mode().Perm(), err)
		}
	}
	if err := WriteCerts(t.TempDir(), 0, nil); err == nil {
		t.Error("WriteCerts with 0 nodes succeeded")
	}
}

// TestCheckPeer: nodes of one CA accept each other; a node of another CA,
// or one without TLS, is told in one line what does not fit.
func TestCheckPeer(t *testing.T) {
	ours, theirs := certsIn(t), certsIn(t)
	addr := serveTLS(t, loadNode(t, ours, "1").Server)
	if err := CheckPeer(addr, loadNode(t, ours, "2")); err != nil {
		t.Errorf("same CA: %v", err)
	}
	err := CheckPeer(addr, loadNode(t, theirs, "2"))
	if !errors.Is(err, ErrTLS) || !strings.Contains(err.Error(), "CA") || strings.Contains(err.Error(), "\n") {
		t.Errorf("another CA: %v, want one ErrTLS line about the CA", err)
	}
	if err := CheckPeer(addr, nil); !errors.Is(err, ErrTLS) || !strings.Contains(err.Error(), "uses mutual TLS") {
		t.Errorf("no TLS against a TLS node: %v, want ErrTLS saying it uses mutual TLS", err)
	}
	plain, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer plain.Close()
	go func() {
		for {
			c, err := plain.Accept()
			if err != nil {
				return
			}
			c.Close() // a plaintext server: no TLS handshake
		}
	}()
	if err := CheckPeer(plain.Addr().String(), nil); err != nil {
		t.Errorf("plaintext to plaintext: %v", err)
	}
}

func TestLoadTLSErrorsNameTheFile(t *testing.T) {
	dir := certsIn(t)
	for _, tc := range []struct{ ca, cert, key, want string }{
		{"missing.pem", "node-1.pem", "node-1.key", "cluster.tls.ca"},
		{"node-1.key", "node-1.pem", "node-1.key", "no PEM certificate"},
		{"ca.pem", "node-1.pem", "node-2.key", "cluster.tls.cert/key"},
	} {
		_, err := LoadTLS(filepath.Join(dir, tc.ca), filepath.Join(dir, tc.cert), filepath.Join(dir, tc.key))
		if !errors.Is(err, ErrTLS) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("LoadTLS(%s, %s, %s) = %v, want ErrTLS naming %q", tc.ca, tc.cert, tc.key, err, tc.want)
		}
	}
}
