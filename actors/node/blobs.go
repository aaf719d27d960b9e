package node

import (
	"bufio"
	"context"
	"crypto/tls"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"strconv"
	"sync"
	"time"

	"github.com/mgrpo/mgrpo/internal/connlimit"
)

// Blobs are large immutable payloads a learner node serves to the other
// nodes on a port of its own (a weight snapshot, cut into parts): one
// stream of bytes per fetch, under the node's TLS, instead of one
// proto.actor message per part. gRPC through proto.actor moves a few
// hundred MB/s and spends the CPU of both sides on it; a plain stream
// moves what the link and a memory copy allow.
//
// The protocol, one request after another on a connection:
//
//	request:  "MGB1" | key length (uint16, big-endian) | key
//	response: status (0: found, 1: no such key) | if found: part count
//	          (uint32) | each part: length (uint64) | bytes
//
// or an await: the newest blob announced on a channel (Announce) other
// than the one the client holds, sent as soon as there is one, so that a
// new version is on its way before the message naming it arrives; the
// client sends nothing while it waits:
//
//	request:  "MGBA" | channel length (uint16) | channel | held key
//	          length (uint16) | held key
//	response: status (1: nothing new within blobIdle) | if found: key
//	          length (uint16) | key | part count | parts, as above
//
// Under TLS both sides present a certificate signed by the cluster's CA
// and negotiate blobALPN, so neither the gRPC port nor a stranger can be
// mistaken for the other side.

// blobMagic opens every fetch request, awaitMagic every await.
const (
	blobMagic  = "MGB1"
	awaitMagic = "MGBA"
)

// blobALPN is the protocol the blob port negotiates under TLS.
const blobALPN = "mgrpo-blobs/1"

const (
	blobFound    byte = 0
	blobNotFound byte = 1
)

const (
	// maxBlobKey bounds a request's key.
	maxBlobKey = 256
	// maxBlobConns bounds the connections a blob server serves at once,
	// and maxBlobConnsPerHost those from one host (a worker node keeps
	// one, and one more per generator actor waiting for the next version);
	// one more is closed at once. The total is at most a connShare of the
	// descriptor limit.
	maxBlobConns        = 256
	maxBlobConnsPerHost = 128
	// blobIdle is how long a server waits for a connection's next request
	// (and for the rest of one that has begun).
	blobIdle = 2 * time.Minute
	// blobRate is the slowest transfer a server waits for: a part of b
	// bytes may take blobIdle + b/blobRate.
	blobRate = 10 << 20
)

// ErrNoBlob: the server holds no blob of the key asked for (replaced by a
// newer one, or never put).
var ErrNoBlob = errors.New("node: no such blob")

// Blob is what a BlobServer serves under a key: its parts, in order, each
// made when a fetch reaches it (encoded on demand, so that a large blob
// need not be held twice). A part is a list of pieces sent one after
// another as its bytes, so that it can be written from where its data
// lie without being gathered into one buffer. Part must be safe for
// concurrent use.
type Blob interface {
	Parts() int
	Part(i int) ([][]byte, error)
}

// Parts is a Blob of parts held in memory.
type Parts [][]byte

// Parts implements Blob.
func (p Parts) Parts() int { return len(p) }

// Part implements Blob.
func (p Parts) Part(i int) ([][]byte, error) { return [][]byte{p[i]}, nil }

// BlobServer serves blobs on a listener of its own (Node.ServeBlobs).
// Safe for concurrent use.
type BlobServer struct {
	lis   net.Listener
	addr  string // host:port other nodes dial
	notes *notices
	limit *connlimit.Counter // the connections being served (lis closes those past its limits)

	mu        sync.Mutex
	blobs     map[string]Blob
	newest    map[string]string // by channel: the key announced last
	announced chan struct{}     // closed by the next Announce or Close
	conns     map[net.Conn]struct{}
	done      bool
	wg        sync.WaitGroup
}

// ServeBlobs starts serving blobs on the node's host at port (0: any free
// port), under the node's TLS when it has one, advertised with the host
// the node's actor system advertises. The node's Stop closes it.
func (n *Node) ServeBlobs(port int) (*BlobServer, error) {
	if n.server != nil {
		return nil, errors.New("node: blobs are served already")
	}
	s, err := serveBlobs(n.host, n.advHost, port, n.tls, n.notes)
	if err == nil {
		n.server = s
	}
	return s, err
}

// NewBlobServer serves blobs on host:port (0: any free port), advertised
// as advertise:port, under t (nil: plaintext), with its one-line notices
// about peers on notices (nil: none). Node.ServeBlobs is this with a
// node's settings.
func NewBlobServer(host, advertise string, port int, t *TLSConfigs, notices io.Writer) (*BlobServer, error) {
	return serveBlobs(host, advertise, port, t, newNotices(notices))
}

func serveBlobs(host, advertise string, port int, t *TLSConfigs, notes *notices) (*BlobServer, error) {
	lis, err := net.Listen("tcp", net.JoinHostPort(host, strconv.Itoa(port)))
	if err != nil {
		return nil, fmt.Errorf("%w: blob port %s:%d: %w", ErrBind, host, port, err)
	}
	limit := connlimit.New(connlimit.Limits{PerHost: maxBlobConnsPerHost, Total: maxBlobConns}.Scaled(connShare))
	lis = limit.Listener(lis, notes.refusedConn("weight")) // before TLS: one past the limits costs no handshake
	if t != nil {
		lis = tls.NewListener(lis, t.serverConfig(blobALPN))
	}
	s := &BlobServer{lis: lis, addr: net.JoinHostPort(advertise, strconv.Itoa(lis.Addr().(*net.TCPAddr).Port)),
		notes: notes, limit: limit, blobs: map[string]Blob{}, newest: map[string]string{},
		announced: make(chan struct{}), conns: map[net.Conn]struct{}{}}
	s.wg.Add(1)
	go s.accept()
	return s, nil
}

// BlobServer is the server ServeBlobs started (nil before).
func (n *Node) BlobServer() *BlobServer { return n.server }

// Addr is the host:port other nodes fetch from.
func (s *BlobServer) Addr() string { return s.addr }

// Put serves b under key from now on, in place of what key held. b's
// parts must not change while it is served.
func (s *BlobServer) Put(key string, b Blob) {
	s.mu.Lock()
	s.blobs[key] = b
	s.mu.Unlock()
}

// Announce makes key, which must be served (Put), the newest blob on
// channel: the awaits of that channel that do not hold it are answered
// with it.
func (s *BlobServer) Announce(channel, key string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.newest[channel] = key
	s.wake()
}

// wake ends the waits for an announcement (s.mu held).
func (s *BlobServer) wake() {
	close(s.announced)
	s.announced = make(chan struct{})
}

// Delete stops serving key (fetches already under way finish).
func (s *BlobServer) Delete(key string) {
	s.mu.Lock()
	delete(s.blobs, key)
	s.mu.Unlock()
}

// Close stops the server and closes its connections.
func (s *BlobServer) Close() error {
	s.mu.Lock()
	if !s.done {
		s.wake()
	}
	s.done = true
	for c := range s.conns {
		c.Close()
	}
	s.mu.Unlock()
	err := s.lis.Close()
	s.wg.Wait()
	return err
}

// accept serves each connection on a goroutine of its own (the listener
// lets through up to maxBlobConnsPerHost from one host and maxBlobConns in
// all at once).
func (s *BlobServer) accept() {
	defer s.wg.Done()
	for {
		c, err := s.lis.Accept()
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return
			}
			time.Sleep(10 * time.Millisecond) // the listener waits out a lack of descriptors; anything else, try again
			continue
		}
		if !s.track(c) {
			c.Close()
			return
		}
		s.wg.Add(1)
		go s.serve(c)
	}
}

// track adds c to the open connections, unless the server is closed.
func (s *BlobServer) track(c net.Conn) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.done {
		return false
	}
	s.conns[c] = struct{}{}
	return true
}

// serve answers c's requests until it closes, sends something that is not
// a request, or is idle for blobIdle. A panic ends the connection with one
// notice, not the process.
func (s *BlobServer) serve(c net.Conn) {
	peer := c.RemoteAddr().String()
	defer func() {
		if v := recover(); v != nil {
			s.notes.say(peer, "panic blobs", "recovered a panic serving blobs to %s: %v (the connection ends; the node goes on)", peer, v)
		}
		s.mu.Lock()
		delete(s.conns, c)
		s.mu.Unlock()
		c.Close()
		s.wg.Done()
	}()
	r, w := bufio.NewReader(c), bufio.NewWriterSize(c, 1<<16)
	for {
		c.SetReadDeadline(time.Now().Add(blobIdle))
		req, err := readBlobRequest(r)
		if tc, ok := c.(*tls.Conn); ok && err != nil && !tc.ConnectionState().HandshakeComplete {
			// The handshake failed: a certificate refused, as on the
			// actor port, and said the same way.
			if kind, reason, ok := handshakeRefusal(err, time.Now()); ok {
				s.notes.say(peer, kind, "refused a connection from %s to the weight port: %s", peer, reason)
			}
			return
		}
		if err != nil {
			if !errors.Is(err, io.EOF) && !isClosed(err) {
				s.notes.say(peer, "blob request", "refused a blob request from %s: %v", peer, err)
			}
			return
		}
		if req.await {
			if !s.await(c, r, w, req) {
				return
			}
			continue
		}
		if err := s.respond(c, w, req.key); err != nil {
			return
		}
	}
}

// await answers an await request once its channel's newest blob is not
// the one the client holds, or with blobNotFound at the connection's read
// deadline (blobIdle). A client that closes its connection or sends
// anything while it waits ends the wait, as does Close. It reports whether
// the connection goes on: after an answer the client may send its next
// request, which is read once it has begun to arrive.
func (s *BlobServer) await(c net.Conn, r *bufio.Reader, w *bufio.Writer, req blobRequest) bool {
	gone := make(chan struct{}) // closed when the client sends or goes away, or at the deadline
	var err error
	go func() {
		_, err = r.Peek(1)
		close(gone)
	}()
	for {
		s.mu.Lock()
		key := s.newest[req.channel]
		b, ok := s.blobs[key]
		announced, done := s.announced, s.done
		s.mu.Unlock()
		if done {
			return false
		}
		if ok && key != req.key {
			if s.write(c, w, key, b) != nil {
				return false
			}
			<-gone // the next request, or the end
			return err == nil
		}
		select {
		case <-announced:
		case <-gone:
			var ne net.Error
			if !errors.As(err, &ne) || !ne.Timeout() {
				return false // gone, or it sent something while it waited
			}
			c.SetWriteDeadline(time.Now().Add(blobIdle)) // nothing new within blobIdle
			w.WriteByte(blobNotFound)
			return w.Flush() == nil
		}
	}
}

// respond writes the answer to a request for key. A part that cannot be
// made ends the connection (the client sees the blob end early).
func (s *BlobServer) respond(c net.Conn, w *bufio.Writer, key string) error {
	s.mu.Lock()
	b, ok := s.blobs[key]
	s.mu.Unlock()
	c.SetWriteDeadline(time.Now().Add(blobIdle))
	if !ok {
		w.WriteByte(blobNotFound)
		return w.Flush()
	}
	return s.write(c, w, "", b)
}

// write sends b with its found status, and its key first when it answers
// an await (key not "").
func (s *BlobServer) write(c net.Conn, w *bufio.Writer, key string, b Blob) error {
	c.SetWriteDeadline(time.Now().Add(blobIdle))
	var head [8]byte
	w.WriteByte(blobFound)
	if key != "" {
		w.Write(binary.BigEndian.AppendUint16(head[:0], uint16(len(key))))
		w.WriteString(key)
	}
	binary.BigEndian.PutUint32(head[:4], uint32(b.Parts()))
	w.Write(head[:4])
	for i := range b.Parts() {
		pieces, err := b.Part(i)
		if err != nil {
			return err
		}
		n := 0
		for _, p := range pieces {
			n += len(p)
		}
		c.SetWriteDeadline(time.Now().Add(blobIdle + time.Duration(n/blobRate)*time.Second))
		binary.BigEndian.PutUint64(head[:], uint64(n))
		w.Write(head[:])
		for _, p := range pieces {
			if _, err := w.Write(p); err != nil { // a piece larger than w's buffer goes to c without a copy
				return err
			}
		}
	}
	return w.Flush()
}

// blobRequest is one request read from a connection: a fetch of key, or
// an await of channel's newest blob by a client holding key.
type blobRequest struct {
	await        bool
	key, channel string
}

// readBlobRequest reads one request; io.EOF when the connection ends
// between requests.
func readBlobRequest(r *bufio.Reader) (blobRequest, error) {
	var magic [len(blobMagic)]byte
	if _, err := io.ReadFull(r, magic[:]); err != nil {
		if errors.Is(err, io.ErrUnexpectedEOF) {
			return blobRequest{}, errors.New("the request ends early")
		}
		return blobRequest{}, err
	}
	var req blobRequest
	switch string(magic[:]) {
	case blobMagic:
	case awaitMagic:
		req.await = true
	default:
		return blobRequest{}, fmt.Errorf("not a blob request (it begins %q)", magic[:])
	}
	first, err := readBlobKey(r)
	if err != nil || !req.await {
		req.key = first
		return req, err
	}
	req.channel = first
	req.key, err = readBlobKey(r)
	return req, err
}

// readBlobKey reads a key (or channel): its length, then its bytes.
func readBlobKey(r *bufio.Reader) (string, error) {
	var head [2]byte
	if _, err := io.ReadFull(r, head[:]); err != nil {
		return "", errors.New("the request ends early")
	}
	n := int(binary.BigEndian.Uint16(head[:]))
	if n > maxBlobKey {
		return "", fmt.Errorf("a key of %d bytes (at most %d)", n, maxBlobKey)
	}
	key := make([]byte, n)
	if _, err := io.ReadFull(r, key); err != nil {
		return "", errors.New("the request ends early")
	}
	return string(key), nil
}

// isClosed reports whether err is the end of a connection rather than
// anything the peer sent: closed here, reset there, or a deadline.
func isClosed(err error) bool {
	var ne net.Error
	return errors.Is(err, net.ErrClosed) || errors.As(err, &ne)
}

// BlobClient fetches blobs from other nodes' blob servers, keeping one
// connection per server for the next fetch. Safe for concurrent use;
// fetches from one server take turns.
type BlobClient struct {
	tls *tls.Config // nil: plaintext

	mu       sync.Mutex
	conns    map[string]*blobConn
	idle     map[string][]*blobConn // by server: await connections kept for the next await
	awaiting map[*blobConn]struct{} // await connections in use
	closed   bool
}

// blobConn is a client's connection to one server.
type blobConn struct {
	mu   sync.Mutex // one fetch at a time
	c    net.Conn   // nil: not connected
	r    *bufio.Reader
	part []byte // where the next part is read when it fits: the last one's memory
}

// maxKeptPart bounds the part buffer a connection keeps between parts
// (a weight chunk is 1 MiB by default); a larger part is read into memory
// of its own.
const maxKeptPart = 64 << 20

// Blobs returns the node's blob client, with the node's TLS.
func (n *Node) Blobs() *BlobClient {
	n.blobsOnce.Do(func() { n.blobs = NewBlobClient(n.tls) })
	return n.blobs
}

// NewBlobClient returns a client dialling with t's client side (nil:
// plaintext).
func NewBlobClient(t *TLSConfigs) *BlobClient {
	b := &BlobClient{conns: map[string]*blobConn{}, idle: map[string][]*blobConn{}, awaiting: map[*blobConn]struct{}{}}
	if t != nil {
		b.tls = t.Client.Clone()
		b.tls.NextProtos = []string{blobALPN}
	}
	return b
}

// Fetch asks the server at addr for key and hands each part to each, in
// order, within timeout. It refuses a blob of more than limit bytes in
// all before reading it. A connection kept from an earlier fetch that
// fails before anything was handed on is dialled again once (the server
// may have closed it meanwhile). ErrNoBlob: the server does not hold key.
// A part is each's only until each returns: the next part is read into
// the same memory, so that a blob of many parts allocates one.
func (b *BlobClient) Fetch(addr, key string, limit int64, timeout time.Duration, each func(part []byte) error) error {
	if len(key) > maxBlobKey {
		return fmt.Errorf("fetch blob %q: a key of %d bytes (at most %d)", key, len(key), maxBlobKey)
	}
	bc := b.conn(addr)
	bc.mu.Lock()
	defer bc.mu.Unlock()
	deadline := time.Now().Add(timeout)
	for try := 0; ; try++ {
		reused := bc.c != nil
		if !reused {
			if err := b.dial(bc, addr, deadline); err != nil {
				return fmt.Errorf("fetch blob %q from %s: %w", key, addr, err)
			}
		}
		handed, err := fetchOn(bc, key, limit, deadline, each)
		if err == nil || errors.Is(err, ErrNoBlob) {
			return err
		}
		bc.c.Close()
		bc.c = nil
		if !reused || handed || try > 0 {
			return fmt.Errorf("fetch blob %q from %s: %w", key, addr, err)
		}
	}
}

// conn returns the client's connection record for addr.
func (b *BlobClient) conn(addr string) *blobConn {
	b.mu.Lock()
	defer b.mu.Unlock()
	bc, ok := b.conns[addr]
	if !ok {
		bc = &blobConn{}
		b.conns[addr] = bc
	}
	return bc
}

// dial connects bc to addr, with TLS when the client has it.
func (b *BlobClient) dial(bc *blobConn, addr string, deadline time.Time) error {
	d := &net.Dialer{Deadline: deadline}
	var c net.Conn
	var err error
	if b.tls != nil {
		c, err = (&tls.Dialer{NetDialer: d, Config: b.tls}).Dial("tcp", addr)
	} else {
		c, err = d.Dial("tcp", addr)
	}
	if err != nil {
		return err
	}
	bc.c, bc.r = c, bufio.NewReaderSize(c, 1<<16)
	return nil
}

// fetchOn sends the request for key on bc and reads the answer; handed
// reports whether any part reached each.
func fetchOn(bc *blobConn, key string, limit int64, deadline time.Time, each func([]byte) error) (handed bool, err error) {
	bc.c.SetDeadline(deadline)
	req := make([]byte, 0, len(blobMagic)+2+len(key))
	req = binary.BigEndian.AppendUint16(append(req, blobMagic...), uint16(len(key)))
	if _, err := bc.c.Write(append(req, key...)); err != nil {
		return false, err
	}
	if err := readStatus(bc, key); err != nil {
		return false, err
	}
	return readParts(bc, limit, each)
}

// readStatus reads the status that opens an answer to a request for key.
func readStatus(bc *blobConn, key string) error {
	status, err := bc.r.ReadByte()
	switch {
	case err != nil:
		return err
	case status == blobNotFound:
		return fmt.Errorf("%w %q at %s", ErrNoBlob, key, bc.c.RemoteAddr())
	case status != blobFound:
		return fmt.Errorf("answer %d to a blob request", status)
	}
	return nil
}

// readParts reads a found blob's parts, from its part count on, handing
// each to each; handed reports whether any part reached each.
func readParts(bc *blobConn, limit int64, each func([]byte) error) (handed bool, err error) {
	var head [8]byte
	if _, err := io.ReadFull(bc.r, head[:4]); err != nil {
		return false, err
	}
	var total int64
	for range binary.BigEndian.Uint32(head[:4]) {
		if _, err := io.ReadFull(bc.r, head[:]); err != nil {
			return handed, err
		}
		n := binary.BigEndian.Uint64(head[:])
		if total += int64(n); n > uint64(limit) || total > limit {
			return handed, fmt.Errorf("a blob of more than %d bytes", limit)
		}
		part := bc.buffer(int(n))
		if _, err := io.ReadFull(bc.r, part); err != nil {
			return handed, err
		}
		handed = true
		if err := each(part); err != nil {
			return handed, err
		}
	}
	return handed, nil
}

// buffer returns n bytes to read a part into: the connection's part
// buffer when it has room, else new memory, kept for the next part when
// it is no larger than maxKeptPart.
func (bc *blobConn) buffer(n int) []byte {
	if n <= cap(bc.part) {
		return bc.part[:n]
	}
	p := make([]byte, n)
	if n <= maxKeptPart {
		bc.part = p
	}
	return p
}

// Await asks the server at addr for the newest blob announced on channel
// (BlobServer.Announce) other than held, the key of the one the caller
// has ("" for none), waits until the server has one and hands each of its
// parts to each, in order; it returns the blob's key. The wait lasts as
// long as ctx and the server allow (ErrNoBlob: nothing new for the
// server's idle time); from its first byte the blob has timeout to arrive
// whole, and is refused if it holds more than limit bytes. A part is
// each's only until each returns. Awaits use connections of their own,
// one at a time each, kept for the next await; ctx's end or Close closes
// the one in use. A kept connection that fails before the server answers
// is dialled again once.
func (b *BlobClient) Await(ctx context.Context, addr, channel, held string, limit int64, timeout time.Duration,
	each func(part []byte) error) (string, error) {
	wrap := func(err error) error { return fmt.Errorf("await blob on %q from %s: %w", channel, addr, err) }
	if len(channel) > maxBlobKey || len(held) > maxBlobKey {
		return "", wrap(fmt.Errorf("a key of more than %d bytes", maxBlobKey))
	}
	for try := 0; ; try++ {
		bc, reused, err := b.awaitConn(addr, time.Now().Add(timeout))
		if err != nil {
			return "", wrap(err)
		}
		stop := context.AfterFunc(ctx, func() { bc.c.Close() })
		key, answered, err := awaitOn(bc, channel, held, limit, timeout, each)
		stop()
		b.done(addr, bc, (err == nil || errors.Is(err, ErrNoBlob)) && ctx.Err() == nil)
		switch {
		case err == nil:
			return key, nil
		case ctx.Err() != nil:
			return "", wrap(ctx.Err())
		case answered || !reused || try > 0 || errors.Is(err, ErrNoBlob):
			return "", wrap(err)
		}
	}
}

// awaitConn returns a kept await connection to addr, or dials one by
// deadline; reused reports which. It fails once the client is closed.
func (b *BlobClient) awaitConn(addr string, deadline time.Time) (bc *blobConn, reused bool, err error) {
	b.mu.Lock()
	if idle := b.idle[addr]; len(idle) > 0 && !b.closed {
		bc = idle[len(idle)-1]
		b.idle[addr] = idle[:len(idle)-1]
		b.awaiting[bc] = struct{}{}
		b.mu.Unlock()
		return bc, true, nil
	}
	b.mu.Unlock()
	bc = &blobConn{}
	if err := b.dial(bc, addr, deadline); err != nil {
		return nil, false, err
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closed {
		bc.c.Close()
		return nil, false, net.ErrClosed
	}
	b.awaiting[bc] = struct{}{}
	return bc, false, nil
}

// done ends an await on bc: the connection is kept for the next one
// (keep), or closed.
func (b *BlobClient) done(addr string, bc *blobConn, keep bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	delete(b.awaiting, bc)
	if keep && !b.closed {
		b.idle[addr] = append(b.idle[addr], bc)
		return
	}
	bc.c.Close()
}

// awaitOn sends an await request on bc and reads the answer; answered
// reports whether the server answered at all.
func awaitOn(bc *blobConn, channel, held string, limit int64, timeout time.Duration, each func([]byte) error) (key string, answered bool, err error) {
	bc.c.SetDeadline(time.Now().Add(blobIdle + timeout)) // the server answers within blobIdle
	req := make([]byte, 0, len(awaitMagic)+4+len(channel)+len(held))
	req = binary.BigEndian.AppendUint16(append(req, awaitMagic...), uint16(len(channel)))
	req = binary.BigEndian.AppendUint16(append(req, channel...), uint16(len(held)))
	if _, err := bc.c.Write(append(req, held...)); err != nil {
		return "", false, err
	}
	if _, err := bc.r.Peek(1); err != nil {
		return "", false, err
	}
	if err := readStatus(bc, channel); err != nil {
		return "", true, err
	}
	bc.c.SetDeadline(time.Now().Add(timeout))
	var head [2]byte
	if _, err := io.ReadFull(bc.r, head[:]); err != nil {
		return "", true, err
	}
	k := make([]byte, binary.BigEndian.Uint16(head[:]))
	if _, err := io.ReadFull(bc.r, k); err != nil {
		return "", true, err
	}
	_, err = readParts(bc, limit, each)
	return string(k), true, err
}

// Close closes the client's connections, and ends its awaits.
func (b *BlobClient) Close() {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.closed = true
	for bc := range b.awaiting {
		bc.c.Close()
	}
	for _, idle := range b.idle {
		for _, bc := range idle {
			bc.c.Close()
		}
	}
	b.idle = nil
	for _, bc := range b.conns {
		bc.mu.Lock()
		if bc.c != nil {
			bc.c.Close()
			bc.c = nil
		}
		bc.mu.Unlock()
	}
}
