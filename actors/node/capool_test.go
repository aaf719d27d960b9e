package node

import (
	"bytes"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// readFile is name's content.
func readFile(t *testing.T, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(name)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// writeCA replaces the CA file name with the concatenation of parts, in
// one rename, as an operator's copy then mv does.
func writeCA(t *testing.T, name string, parts ...[]byte) {
	t.Helper()
	if err := os.WriteFile(name+".new", bytes.Join(parts, nil), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(name+".new", name); err != nil {
		t.Fatal(err)
	}
}

// pemPool is a pool of the PEM certificates certs.
func pemPool(t *testing.T, certs ...[]byte) *x509.CertPool {
	t.Helper()
	pool := x509.NewCertPool()
	for _, c := range certs {
		if !pool.AppendCertsFromPEM(c) {
			t.Fatal("not a PEM certificate")
		}
	}
	return pool
}

// TestReadCAs: every certificate of a CA file is trusted (a bundle), text
// and other blocks between them are passed over; a file with none, a
// certificate that does not parse, or a block cut short is an error,
// never a smaller pool.
func TestReadCAs(t *testing.T) {
	a, b := readFile(t, filepath.Join(certsIn(t), "ca.pem")), readFile(t, filepath.Join(certsIn(t), "ca.pem"))
	key := readFile(t, filepath.Join(certsIn(t), "ca.key"))
	bad := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: []byte("not DER")})
	for _, tc := range []struct {
		name  string
		file  []byte
		certs [][]byte // the PEM certificates the pool holds
		want  string   // in the error
	}{
		{"one", a, [][]byte{a}, ""},
		{"bundle", append(append([]byte{}, a...), b...), [][]byte{a, b}, ""},
		{"text and a key around", bytes.Join([][]byte{[]byte("# the old CA\n"), a, key, []byte("subject=new\n"), b}, nil), [][]byte{a, b}, ""},
		{"a key only", key, nil, "no PEM certificate"},
		{"empty", nil, nil, "no PEM certificate"},
		{"cut short", append(append([]byte{}, a...), b[:len(b)/2]...), nil, "cut short after 1 certificate (a file still being written?)"},
		{"cut in the end line", append(append([]byte{}, a...), b[:len(b)-4]...), nil, "cut short"},
		{"a certificate that does not parse", append(append([]byte{}, a...), bad...), nil, "certificate 2 cannot be read"},
	} {
		name := filepath.Join(t.TempDir(), "ca.pem")
		writeCA(t, name, tc.file)
		cas, err := ReadCerts(name)
		switch {
		case tc.want == "" && err != nil:
			t.Errorf("%s: %v", tc.name, err)
		case tc.want == "" && !poolOf(cas).Equal(pemPool(t, tc.certs...)):
			t.Errorf("%s: the pool does not hold the %d certificates of the file", tc.name, len(tc.certs))
		case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
			t.Errorf("%s: %v, want an error with %q", tc.name, err, tc.want)
		}
	}
}

// TestRotatedCA: a node's CA file (cluster.tls.ca) rotated under it, with
// no restart. Started with CA A, the node refuses a peer of CA B; the
// file made the bundle A+B, it accepts that peer, as server (the actor
// port and the weight port) and as client; a file caught half written, or
// garbage, keeps A+B; the file reduced to B, it refuses a peer of A with
// the reason "another CA", on both sides. Each read of the file is a
// notice: the CAs trusted from then on, or why the last ones still are.
// The CA was read once: a rotation needed every node restarted, twice.
func TestRotatedCA(t *testing.T) {
	dirA, dirB := certsIn(t), certsIn(t)
	caA, caB := readFile(t, filepath.Join(dirA, "ca.pem")), readFile(t, filepath.Join(dirB, "ca.pem"))
	both := filepath.Join(t.TempDir(), "both.pem") // the peers trust both CAs throughout
	writeCA(t, both, caA, caB)
	caFile := filepath.Join(t.TempDir(), "ca.pem") // ours, rotated
	writeCA(t, caFile, caA)
	ours, err := LoadTLS(caFile, filepath.Join(dirA, "node-1.pem"), filepath.Join(dirA, "node-1.key"))
	if err != nil {
		t.Fatal(err)
	}
	var caNotes lockedBuffer // what ours says of its CA file (a node's notices)
	ours.cas.notes.Store(newNotices(&caNotes))
	peer := func(dir string) *TLSConfigs {
		c, err := LoadTLS(both, filepath.Join(dir, "node-2.pem"), filepath.Join(dir, "node-2.key"))
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	peerA, peerB := peer(dirA), peer(dirB)
	var peerNotes lockedBuffer
	peerAt := map[*TLSConfigs]string{peerA: serveTLS(t, peerA.Server, &peerNotes), peerB: serveTLS(t, peerB.Server, &peerNotes)}

	// accepts checks both directions with the peer p: ours as server (a
	// check as a node does it, then a fetch from the weight port) and as
	// client (a check, then a handshake with ours.Client as gRPC does it).
	// Ours serves on new ports each time, so that its notices (one a
	// minute per peer and kind) say each refusal.
	accepts := func(step string, p *TLSConfigs, want bool, refusal string) {
		t.Helper()
		var notes lockedBuffer
		oursAt := serveTLS(t, ours.Server, &notes) // the actor port's credentials
		blobs := blobServer(t, ours, &notes)
		blobs.Put("v1", Parts([][]byte{[]byte("weights")}))
		server := CheckPeer(oursAt, p)
		c := NewBlobClient(p)
		_, fetchErr := fetchAll(c, blobs.Addr(), "v1", 1<<10)
		c.Close()
		client := CheckPeer(peerAt[p], ours)
		conn, dialErr := tls.Dial("tcp", peerAt[p], ours.Client)
		if dialErr == nil {
			conn.Close()
		}
		for _, e := range []struct {
			what string
			err  error
			why  string
		}{
			{"as server", server, "refused this node's certificate: it is signed by another CA than the peer's cluster.tls.ca"},
			{"on the weight port", fetchErr, ""},
			{"as client", client, `its certificate "mgrpo node-2" is signed by another CA than this node's cluster.tls.ca`},
			{"as client, dialling", dialErr, `certificate "mgrpo node-2" is signed by another CA than this node's cluster.tls.ca`},
		} {
			switch {
			case want && e.err != nil:
				t.Errorf("%s: %s: %v, want accepted", step, e.what, e.err)
			case !want && e.err == nil:
				t.Errorf("%s: %s: accepted, want refused", step, e.what)
			case !want && e.why != "" && (!errors.Is(e.err, ErrTLS) || !strings.Contains(e.err.Error(), e.why)):
				t.Errorf("%s: %s: %v, want ErrTLS saying %q", step, e.what, e.err, e.why)
			}
		}
		for _, port := range []string{"", "to the weight port: "} {
			if !want && !waitFor(&notes, port+refusal) {
				t.Errorf("%s: ours did not say %q:\n%s", step, port+refusal, notes.String())
			}
		}
	}
	refusedB := `its certificate "mgrpo node-2" is signed by another CA`
	accepts("CA A", peerA, true, "")
	accepts("CA A", peerB, false, refusedB)

	writeCA(t, caFile, caA, caB)
	accepts("bundle A+B", peerA, true, "")
	accepts("bundle A+B", peerB, true, "")

	for _, garbage := range [][][]byte{{caA, caB[:len(caB)/2]}, {[]byte("garbage")}} {
		writeCA(t, caFile, garbage...)
		accepts("a half-written file after A+B", peerA, true, "")
		accepts("a half-written file after A+B", peerB, true, "")
	}

	writeCA(t, caFile, caB)
	accepts("B only", peerB, true, "")
	accepts("B only", peerA, false, refusedB)

	said := strings.Split(strings.TrimSpace(caNotes.String()), "\n")
	nameA, nameB := subject(pemCert(t, caA)), subject(pemCert(t, caB))
	for i, want := range []string{
		"cluster.tls.ca " + caFile + " read again: peers are verified against " + nameA + " and " + nameB + " from now on",
		"cluster.tls.ca " + caFile + " changed but cannot be used (" + caFile + ": a PEM block cut short after 1 certificate",
		"cluster.tls.ca " + caFile + " read again: peers are verified against " + nameB + " from now on",
	} {
		if i >= len(said) || !strings.HasPrefix(said[i], want) {
			t.Errorf("ours said of its CA file:\n%s\nwant line %d %q…", caNotes.String(), i+1, want)
		}
	}
	if len(said) != 3 {
		t.Errorf("ours said %d lines of its CA file, want 3 (the second unreadable file within a minute of the first is not said):\n%s", len(said), caNotes.String())
	}
}

// pemCert is the first certificate of the PEM b.
func pemCert(t *testing.T, b []byte) *x509.Certificate {
	t.Helper()
	block, _ := pem.Decode(b)
	c, err := x509.ParseCertificate(block.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// TestDirCAKeys: the CA key in a directory may be SEC 1 (what certs
// writes) or PKCS #8 (other tooling; tls.LoadX509KeyPair read both), and
// is matched to its certificate in a bundle; a key of no certificate in
// ca.pem is refused.
func TestDirCAKeys(t *testing.T) {
	dir, other := certsIn(t), certsIn(t)
	_, _, key, err := DirCA(dir)
	if err != nil {
		t.Fatal(err)
	}
	der, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "ca.key"), pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
	writeCA(t, filepath.Join(dir, "ca.pem"), readFile(t, filepath.Join(other, "ca.pem")), readFile(t, filepath.Join(dir, "ca.pem")))
	if cas, signer, got, err := DirCA(dir); err != nil || signer != 1 || len(cas) != 2 || !got.Equal(key) {
		t.Errorf("a PKCS #8 key, second in the bundle: signer %d of %d, %v", signer, len(cas), err)
	}
	if err := AddNodeCert(dir, "node-9", nil, time.Now().Add(-time.Hour), time.Now().Add(time.Hour)); err != nil {
		t.Errorf("AddNodeCert with a PKCS #8 key: %v", err)
	}
	writeCA(t, filepath.Join(dir, "ca.pem"), readFile(t, filepath.Join(other, "ca.pem")))
	if _, _, _, err := DirCA(dir); err == nil || !strings.Contains(err.Error(), "ca.key is the key of no certificate in ca.pem") {
		t.Errorf("a key of another CA: %v", err)
	}
}
