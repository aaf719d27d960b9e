package node

import (
	"bytes"
	"context"
	"errors"
	"net"
	"strconv"
	"strings"
	"testing"
	"time"
	"unsafe"
)

// blobServer starts a blob server on 127.0.0.1 with t's TLS (nil:
// plaintext), its notices on notes.
func blobServer(t *testing.T, tc *TLSConfigs, notes *lockedBuffer) *BlobServer {
	t.Helper()
	n := &Node{tls: tc, notes: newNotices(notes), host: "127.0.0.1", advHost: "127.0.0.1"}
	s, err := n.ServeBlobs(0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// fetchAll fetches key whole.
func fetchAll(c *BlobClient, addr, key string, limit int64) ([][]byte, error) {
	var parts [][]byte
	err := c.Fetch(addr, key, limit, 10*time.Second, func(p []byte) error {
		parts = append(parts, bytes.Clone(p)) // p is the client's until this returns
		return nil
	})
	return parts, err
}

// transport is how a blob server and its client talk: plain, or under
// mutual TLS.
type transport struct {
	name           string
	server, client *TLSConfigs
}

// plainAndTLS are both transports, TLS with certificates signed by ours.
func plainAndTLS(t *testing.T, ours string) []transport {
	return []transport{{"plain", nil, nil}, {"tls", loadNode(t, ours, "node-1"), loadNode(t, ours, "node-2")}}
}

// TestBlobs: what is put is fetched part for part, plain and under
// mutual TLS, several times on one connection, and again after the
// server dropped the connection kept; an unknown key is ErrNoBlob, a blob
// over the limit and a client of another CA are refused, the latter with
// the reason the actor port gives (it read as x509's text).
func TestBlobs(t *testing.T) {
	ours, theirs := certsIn(t), certsIn(t)
	parts := [][]byte{[]byte("first"), {}, bytes.Repeat([]byte{7}, 3<<20)}
	for _, tc := range plainAndTLS(t, ours) {
		t.Run(tc.name, func(t *testing.T) {
			var notes lockedBuffer
			s := blobServer(t, tc.server, &notes)
			s.Put("v1", Parts(parts))
			c := NewBlobClient(tc.client)
			defer c.Close()
			for try := range 3 {
				if try == 2 {
					s.dropConns()
				}
				got, err := fetchAll(c, s.Addr(), "v1", 4<<20)
				if err != nil || len(got) != len(parts) {
					t.Fatalf("fetch %d: %d parts, %v", try, len(got), err)
				}
				for i := range parts {
					if !bytes.Equal(got[i], parts[i]) {
						t.Fatalf("fetch %d: part %d differs", try, i)
					}
				}
			}
			if _, err := fetchAll(c, s.Addr(), "v2", 4<<20); !errors.Is(err, ErrNoBlob) {
				t.Errorf("unknown key: %v, want ErrNoBlob", err)
			}
			s.Delete("v1")
			if _, err := fetchAll(c, s.Addr(), "v1", 4<<20); !errors.Is(err, ErrNoBlob) {
				t.Errorf("deleted key: %v, want ErrNoBlob", err)
			}
			s.Put("v1", Parts(parts))
			if _, err := fetchAll(c, s.Addr(), "v1", 1<<20); err == nil || !strings.Contains(err.Error(), "more than") {
				t.Errorf("over the limit: %v", err)
			}
			if _, err := fetchAll(c, s.Addr(), "v1", 4<<20); err != nil {
				t.Errorf("after a refused fetch: %v", err)
			}
		})
	}
	t.Run("another CA", func(t *testing.T) {
		var notes lockedBuffer
		s := blobServer(t, loadNode(t, ours, "node-1"), &notes)
		s.Put("v1", Parts(parts))
		c := NewBlobClient(loadNode(t, theirs, "node-1"))
		defer c.Close()
		if _, err := fetchAll(c, s.Addr(), "v1", 4<<20); err == nil {
			t.Error("a client of another CA fetched the blob")
		}
		if want := `to the weight port: it refuses this node's certificate (tls: bad certificate): is it of another cluster.tls.ca`; !waitFor(&notes, want) {
			t.Errorf("the server's notices %q, want %q", notes.String(), want)
		}
	})
}

// TestBlobServerShedsHostileClients: garbage, a huge key, a request cut
// short and an idle connection each end their connection (one notice per
// kind and peer) while a good client is served throughout; a connection
// beyond maxBlobConnsPerHost from one host is closed at once, and served again once others
// have closed.
func TestBlobServerShedsHostileClients(t *testing.T) {
	var notes lockedBuffer
	s := blobServer(t, nil, &notes)
	s.Put("k", Parts{[]byte("weights")})
	good := NewBlobClient(nil)
	defer good.Close()
	idle, err := net.Dial("tcp", s.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer idle.Close()
	for _, bad := range [][]byte{
		[]byte("GET / HTTP/1.1\r\nHost: x\r\n\r\n"),
		append([]byte(blobMagic), 0xff, 0xff),
		append([]byte(blobMagic), 0, 10, 'k'),
		append([]byte(awaitMagic), 0, 1, 'c', 0xff, 0xff), // a held key too long
		append([]byte(awaitMagic), 0, 1, 'c', 0, 4, 'k'),  // cut short
		{0x16, 3, 1, 0, 5, 1, 2, 3, 4, 5},                 // a TLS record to a plain server
	} {
		c, err := net.Dial("tcp", s.Addr())
		if err != nil {
			t.Fatal(err)
		}
		c.Write(bad)
		c.(*net.TCPConn).CloseWrite()
		c.SetReadDeadline(time.Now().Add(5 * time.Second))
		if n, err := c.Read(make([]byte, 16)); n != 0 || err == nil {
			t.Errorf("%q: read %d bytes, %v; want the connection closed", bad, n, err)
		}
		c.Close()
		if got, err := fetchAll(good, s.Addr(), "k", 1<<10); err != nil || string(got[0]) != "weights" {
			t.Fatalf("after %q: %q, %v", bad, got, err)
		}
	}
	if !waitFor(&notes, "refused a blob request from 127.0.0.1") || strings.Count(notes.String(), "\n") != 1 {
		t.Errorf("notices: %q, want one line", notes.String())
	}
	perHost := s.limit.Limits().PerHost
	held := make([]net.Conn, 0, perHost)
	for len(held) < perHost-2 { // and idle's and good's
		c, err := net.Dial("tcp", s.Addr())
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		held = append(held, c)
	}
	late := NewBlobClient(nil)
	defer late.Close()
	if _, err := fetchAll(late, s.Addr(), "k", 1<<10); err == nil {
		t.Error("a connection beyond the limit was served")
	}
	if !waitFor(&notes, "too many connections: "+strconv.Itoa(perHost)+" open from 127.0.0.1") {
		t.Errorf("notices: %q, want the limit named", notes.String())
	}
	for _, c := range held {
		c.Close()
	}
	idle.Close()
	deadline := time.Now().Add(10 * time.Second)
	for {
		_, err := fetchAll(late, s.Addr(), "k", 1<<10)
		if err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the server serves nothing after its connections closed: %v", err)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// awaitAll awaits a blob on channel c not held, whole.
func awaitAll(ctx context.Context, c *BlobClient, addr, channel, held string) (string, [][]byte, error) {
	var parts [][]byte
	key, err := c.Await(ctx, addr, channel, held, 1<<20, 10*time.Second, func(p []byte) error {
		parts = append(parts, bytes.Clone(p))
		return nil
	})
	return key, parts, err
}

// awaited is what an await ended with.
type awaited struct {
	key   string
	parts [][]byte
	err   error
}

// awaitAsync starts awaitAll on a goroutine of its own.
func awaitAsync(ctx context.Context, c *BlobClient, addr, channel, held string) <-chan awaited {
	out := make(chan awaited, 1)
	go func() {
		key, parts, err := awaitAll(ctx, c, addr, channel, held)
		out <- awaited{key, parts, err}
	}()
	return out
}

// pending fails t if the await has ended.
func pending(t *testing.T, res <-chan awaited, what string) {
	t.Helper()
	select {
	case r := <-res:
		t.Fatalf("%s: the await ended (%q, %v)", what, r.key, r.err)
	case <-time.After(50 * time.Millisecond):
	}
}

// TestBlobAwait: an await is answered at once with the newest blob
// announced on its channel that the client does not hold, and otherwise
// once one is announced and served, plain and under mutual TLS; another
// channel's announcement and an announced key no longer served do not
// answer it; awaits in turn share a connection, dialled again when the
// server has dropped it. Its context (the server then frees the
// connection's slot), the client's Close and the server's Close each end
// a wait.
func TestBlobAwait(t *testing.T) {
	ours := certsIn(t)
	for _, tc := range plainAndTLS(t, ours) {
		t.Run(tc.name, func(t *testing.T) {
			var notes lockedBuffer
			s := blobServer(t, tc.server, &notes)
			c := NewBlobClient(tc.client)
			defer c.Close()
			ctx := context.Background()
			s.Put("w/1", Parts{[]byte("one"), []byte("1")})
			s.Announce("w", "w/1")
			if key, parts, err := awaitAll(ctx, c, s.Addr(), "w", ""); err != nil || key != "w/1" || len(parts) != 2 || string(parts[0]) != "one" {
				t.Fatalf("newest already announced: %q, %q, %v", key, parts, err)
			}
			res := awaitAsync(ctx, c, s.Addr(), "w", "w/1")
			pending(t, res, "the newest held")
			s.Put("x/9", Parts{[]byte("other")})
			s.Announce("x", "x/9")
			pending(t, res, "another channel announced")
			s.Announce("w", "w/gone")
			pending(t, res, "a key not served announced")
			s.Put("w/2", Parts{[]byte("two")})
			s.Announce("w", "w/2")
			r := <-res
			if r.err != nil || r.key != "w/2" || len(r.parts) != 1 || string(r.parts[0]) != "two" {
				t.Fatalf("after w/2 was announced: %q, %q, %v", r.key, r.parts, r.err)
			}
			s.mu.Lock()
			conns := len(s.conns)
			s.mu.Unlock()
			if conns != 1 {
				t.Errorf("two awaits in turn held %d connections, want 1 (kept for the next)", conns)
			}
			s.dropConns()
			s.Put("w/3", Parts{[]byte("three")})
			s.Announce("w", "w/3")
			if key, _, err := awaitAll(ctx, c, s.Addr(), "w", "w/2"); err != nil || key != "w/3" {
				t.Errorf("after the server dropped the kept connection: %q, %v", key, err)
			}
			if notes.String() != "" {
				t.Errorf("notices: %q", notes.String())
			}
		})
	}
	t.Run("ended", func(t *testing.T) {
		s := blobServer(t, nil, nil)
		c := NewBlobClient(nil)
		defer c.Close()
		ctx, cancel := context.WithCancel(context.Background())
		res := awaitAsync(ctx, c, s.Addr(), "w", "")
		pending(t, res, "nothing announced")
		cancel()
		if r := <-res; !errors.Is(r.err, context.Canceled) {
			t.Errorf("cancelled: %v, want context.Canceled", r.err)
		}
		for deadline := time.Now().Add(10 * time.Second); s.limit.Open() > 0; time.Sleep(5 * time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatal("the server still serves a cancelled await's connection")
			}
		}
		res = awaitAsync(context.Background(), c, s.Addr(), "w", "")
		pending(t, res, "nothing announced")
		c.Close()
		if r := <-res; r.err == nil {
			t.Error("the client closed: no error")
		}
		c = NewBlobClient(nil)
		defer c.Close()
		res = awaitAsync(context.Background(), c, s.Addr(), "w", "")
		pending(t, res, "nothing announced")
		s.Close()
		if r := <-res; r.err == nil {
			t.Error("the server closed: no error")
		}
		if _, _, err := awaitAll(context.Background(), c, s.Addr(), "w", ""); err == nil {
			t.Error("an await of a closed server: no error")
		}
	})
}

// dropConns closes the server's side of every open connection (a server
// that went away and came back, as a client sees it).
func (s *BlobServer) dropConns() {
	s.mu.Lock()
	defer s.mu.Unlock()
	for c := range s.conns {
		c.Close()
	}
}

// failingBlob's second part cannot be made.
type failingBlob struct{}

func (failingBlob) Parts() int { return 3 }
func (failingBlob) Part(i int) ([][]byte, error) {
	if i == 1 {
		return nil, errors.New("no part")
	}
	return [][]byte{{byte(i)}}, nil
}

// piecedBlob's parts are each sent as several pieces.
type piecedBlob [][][]byte

func (p piecedBlob) Parts() int                   { return len(p) }
func (p piecedBlob) Part(i int) ([][]byte, error) { return p[i], nil }

// TestBlobPieces: a part made of pieces arrives as their bytes one after
// another, and the parts of a blob are read into one buffer.
func TestBlobPieces(t *testing.T) {
	var notes lockedBuffer
	s := blobServer(t, nil, &notes)
	big := bytes.Repeat([]byte{9}, 200<<10) // past the server's write buffer: written from where it lies
	s.Put("p", piecedBlob{{[]byte("ab"), nil, big, []byte("c")}, {}, {[]byte("de"), {}}, {[]byte("fgh")}})
	want := [][]byte{append(append([]byte("ab"), big...), 'c'), {}, []byte("de"), []byte("fgh")}
	c := NewBlobClient(nil)
	defer c.Close()
	var first *byte
	i := 0
	err := c.Fetch(s.Addr(), "p", 1<<20, 10*time.Second, func(p []byte) error {
		if !bytes.Equal(p, want[i]) {
			t.Errorf("part %d: %d bytes, want %d", i, len(p), len(want[i]))
		}
		if i == 0 {
			first = unsafe.SliceData(p)
		} else if len(p) > 0 && unsafe.SliceData(p) != first {
			t.Errorf("part %d was read into new memory, not the first part's", i)
		}
		i++
		return nil
	})
	if err != nil || i != len(want) {
		t.Fatalf("%d parts, %v", i, err)
	}
}

// TestBlobPartFails: a part the blob cannot make ends the fetch with an
// error, not a short blob, and the server serves the next fetch.
func TestBlobPartFails(t *testing.T) {
	var notes lockedBuffer
	s := blobServer(t, nil, &notes)
	s.Put("bad", failingBlob{})
	s.Put("good", Parts{[]byte("ok")})
	c := NewBlobClient(nil)
	defer c.Close()
	if got, err := fetchAll(c, s.Addr(), "bad", 1<<10); err == nil {
		t.Errorf("fetched %q from a blob whose part failed", got)
	}
	if got, err := fetchAll(c, s.Addr(), "good", 1<<10); err != nil || string(got[0]) != "ok" {
		t.Errorf("then: %q, %v", got, err)
	}
}
