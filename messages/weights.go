package messages

import (
	"cmp"
	"encoding/binary"
	"fmt"
	"math"
	"runtime"
	"slices"
	"sort"
	"sync"
	"sync/atomic"
	"unsafe"

	"github.com/mgrpo/mgrpo/internal/bf16"
)

// Tensor is a named float32 tensor as Go values.
type Tensor struct {
	Name  string
	Shape []int64 // e.g. [out, in] for a linear weight
	Data  []float32
	// DType is how ChunkWeights sends Data: FLOAT32 as it is, BF16 rounded
	// to bfloat16 (half the bytes; the Assembler widens it back, exactly).
	// The Assembler reports the dtype each tensor travelled as.
	DType DType
}

// ChunkWeights splits a snapshot into PolicyWeights messages whose tensor
// data total at most maxChunkBytes each (a tensor larger than that is
// split across chunks), each tensor as its DType. Every chunk gets a
// DeriveMeta copy of meta. The tensors are only read; on a little-endian
// machine (the wire's order) a FLOAT32 tensor's chunks are its own memory,
// not a copy, so the caller hands over tensors that nothing changes any
// more (a BF16 one's are a rounded copy). maxChunkBytes must be at least 4.
func ChunkWeights(meta *StepMeta, version int64, tensors []Tensor, maxChunkBytes int) []*PolicyWeights {
	if maxChunkBytes < 4 {
		panic(fmt.Sprintf("messages: ChunkWeights maxChunkBytes=%d < 4", maxChunkBytes))
	}
	limit := maxChunkBytes / 4 * 4 // whole float32s per chunk
	var chunks []*PolicyWeights
	var pieces []encodePiece
	cur := &PolicyWeights{Meta: DeriveMeta(meta), Version: version}
	used := 0
	flush := func() {
		chunks = append(chunks, cur)
		cur = &PolicyWeights{Meta: DeriveMeta(meta), Version: version}
		used = 0
	}
	for _, t := range tensors {
		size := dtypeSize(t.DType)
		total := int64(size * len(t.Data))
		for off := 0; ; {
			if limit-used < size {
				flush()
			}
			n := min(len(t.Data)-off, (limit-used)/size)
			c := &TensorChunk{Name: t.Name, Shape: append([]int64(nil), t.Shape...), Dtype: t.DType,
				Offset: int64(size * off), TotalBytes: total}
			cur.Tensors = append(cur.Tensors, c)
			pieces = append(pieces, encodePiece{c, t.Data[off : off+n]})
			used += size * n
			if off += n; off == len(t.Data) {
				break
			}
		}
	}
	if len(cur.Tensors) > 0 || len(chunks) == 0 {
		flush()
	}
	for i, c := range chunks {
		c.ChunkIndex, c.ChunkCount = int32(i), int32(len(chunks))
	}
	encodePieces(pieces)
	return chunks
}

// encodePiece is one TensorChunk of ChunkWeights and the elements it carries.
type encodePiece struct {
	c    *TensorChunk
	data []float32
}

// encodePieces sets each piece's Data to its elements as its dtype, on up
// to GOMAXPROCS goroutines when there is enough to round (a bf16 snapshot
// of SmolLM2-135M is 135 M roundings: 0.4 s on one core).
func encodePieces(pieces []encodePiece) {
	work := 0
	for _, p := range pieces {
		if p.c.GetDtype() != DType_FLOAT32 || !littleEndian() {
			work += len(p.data)
		}
	}
	workers := min(runtime.GOMAXPROCS(0), work/parallelEncode+1)
	if workers == 1 { // float32 views, or little to round: no goroutine to wait for
		for _, p := range pieces {
			p.c.Data = encodeAs(p.c.GetDtype(), p.data)
		}
		return
	}
	var next atomic.Int64
	var wg sync.WaitGroup
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := next.Add(1) - 1; i < int64(len(pieces)); i = next.Add(1) - 1 {
				p := pieces[i]
				p.c.Data = encodeAs(p.c.GetDtype(), p.data)
			}
		}()
	}
	wg.Wait()
}

// parallelEncode is the elements to encode that warrant one more
// goroutine.
const parallelEncode = 1 << 20

// dtypeSize is the bytes of one element travelling as d (0: an unknown
// dtype).
func dtypeSize(d DType) int {
	switch d {
	case DType_FLOAT32:
		return elemBytes
	case DType_BF16:
		return 2
	}
	return 0
}

// encodeAs is x as the little-endian bytes of dtype d.
func encodeAs(d DType, x []float32) []byte {
	if d != DType_BF16 {
		return floatBytes(x)
	}
	b := make([]byte, 2*len(x))
	for i, v := range x {
		binary.LittleEndian.PutUint16(b[2*i:], bf16.Round(v))
	}
	return b
}

// decodeAs fills dst from src, the little-endian elements of dtype d
// (at least len(dst) of them); bfloat16 widens exactly.
func decodeAs(d DType, dst []float32, src []byte) {
	if d != DType_BF16 {
		decodeFloats(dst, src)
		return
	}
	for i := range dst {
		dst[i] = bf16.Float32(binary.LittleEndian.Uint16(src[2*i:]))
	}
}

// floatBytes is x as little-endian bytes: x's own memory where the
// machine is little-endian (a snapshot of megabytes is cut without a
// copy), an encoded copy elsewhere.
func floatBytes(x []float32) []byte {
	if len(x) == 0 || !littleEndian() {
		return encodeFloats(x)
	}
	return unsafe.Slice((*byte)(unsafe.Pointer(unsafe.SliceData(x))), elemBytes*len(x))
}

func encodeFloats(x []float32) []byte {
	b := make([]byte, elemBytes*len(x))
	for i, v := range x {
		binary.LittleEndian.PutUint32(b[elemBytes*i:], math.Float32bits(v))
	}
	return b
}

// decodeFloats fills dst from the little-endian float32s of src, which
// holds at least len(dst) of them: one copy where the machine is
// little-endian.
func decodeFloats(dst []float32, src []byte) {
	if len(dst) > 0 && littleEndian() {
		copy(unsafe.Slice((*byte)(unsafe.Pointer(unsafe.SliceData(dst))), elemBytes*len(dst)), src)
		return
	}
	for i := range dst {
		dst[i] = math.Float32frombits(binary.LittleEndian.Uint32(src[elemBytes*i:]))
	}
}

// littleEndian reports whether this machine lays out a float32 as the
// wire does.
func littleEndian() bool { return binary.NativeEndian.Uint16([]byte{1, 0}) == 1 }

// DefaultMaxBytes is the Assembler's limit on the declared bytes of all
// tensors of one version when its MaxBytes is not positive (16 GiB).
const DefaultMaxBytes int64 = 1 << 34

// elemBytes is the size of one tensor element: a little-endian float32.
const elemBytes = 4

// Assembler rebuilds a snapshot from PolicyWeights chunks arriving in any
// order, each tensor as float32 whatever dtype it travelled as. Chunks are
// untrusted: one that does not fit the snapshot (bad header, an unknown
// dtype, a shape, dtype or total_bytes that disagrees with the tensor's
// other pieces or with numel times the dtype's size, a byte range outside
// the tensor, not of whole elements or overlapping one already received,
// a version whose float32 tensors pass MaxBytes, or a last chunk that
// leaves a tensor incomplete) is an ErrChunk and leaves the Assembler
// exactly as it was. Tensor buffers are allocated only after their chunk
// has been checked. It is not safe for concurrent use; an actor owns one.
type Assembler struct {
	// MaxBytes caps the float32 bytes of all tensors of one version;
	// zero or negative means DefaultMaxBytes. When it is set, a version's
	// tensors share one buffer of MaxBytes, allocated with the first of
	// them, one after another as they first arrive (Flat).
	MaxBytes int64
	// Buffer, with MaxBytes set, is where the next version is assembled
	// when it has room for MaxBytes (its capacity), instead of a new
	// buffer: the caller hands back a version's buffer it no longer reads
	// (one it uploaded to a device), and a version of hundreds of
	// megabytes is assembled without allocating and zeroing as much
	// again. Flat's result may then be Buffer.
	Buffer []float32

	version int64
	count   int32
	seen    map[int32]bool
	tensors map[string]*partial
	bytes   int64     // float32 bytes of all tensors in tensors
	arena   []float32 // with MaxBytes set: the tensors' data so far, in the order they first arrived
}

// partial is one tensor being assembled.
type partial struct {
	t        Tensor
	total    int64  // bytes as it travels
	first    [2]int // (chunk index, position) of its first piece
	spans    []span // byte ranges received, sorted, disjoint, adjacent ones merged
	received int64  // bytes received
	at       int    // its first element's index in the arena (-1: a buffer of its own)
}

// span is the byte range [lo, hi) of a tensor.
type span struct{ lo, hi int64 }

// pending is what a checked chunk adds to one tensor.
type pending struct {
	shape []int64
	dtype DType
	total int64
	isNew bool
	first [2]int
	spans []span
	bytes int64
}

// Add takes one chunk (only read, never kept). It returns true once every
// chunk of the version has arrived. A valid chunk of a newer version
// discards a partial older snapshot; one of an older version is an
// ErrChunk.
func (a *Assembler) Add(w *PolicyWeights) (bool, error) {
	base := a
	if a.seen == nil || w.GetVersion() > a.version {
		base = &Assembler{MaxBytes: a.MaxBytes, Buffer: a.Buffer, version: w.GetVersion(), count: w.GetChunkCount(),
			seen: map[int32]bool{}, tensors: map[string]*partial{}}
	}
	adds, err := base.check(w)
	if err != nil {
		return false, fmt.Errorf("version %d chunk %d: %w", w.GetVersion(), w.GetChunkIndex(), err)
	}
	base.apply(w, adds)
	*a = *base
	return a.Done(), nil
}

// check validates w against a without changing a and returns what w adds
// to each tensor it names.
func (a *Assembler) check(w *PolicyWeights) (map[string]*pending, error) {
	idx := w.GetChunkIndex()
	switch {
	case w.GetVersion() < a.version:
		return nil, fmt.Errorf("%w: version %d while assembling %d", ErrChunk, w.GetVersion(), a.version)
	case a.count < 1 || w.GetChunkCount() != a.count || idx < 0 || idx >= a.count:
		return nil, fmt.Errorf("%w: chunk %d of %d, want one of the version's %d (at least 1)", ErrChunk, idx, w.GetChunkCount(), a.count)
	case a.seen[idx]:
		return nil, fmt.Errorf("%w: chunk %d of version %d twice", ErrChunk, idx, a.version)
	}
	adds := map[string]*pending{}
	bytes := a.bytes
	for i, c := range w.GetTensors() {
		p, err := a.pendingFor(adds, c, &bytes)
		if err != nil {
			return nil, err
		}
		if err := p.addPiece(a.tensors[c.GetName()], c, [2]int{int(idx), i}); err != nil {
			return nil, err
		}
	}
	if int32(len(a.seen))+1 == a.count {
		if err := a.checkComplete(adds); err != nil {
			return nil, err
		}
	}
	return adds, nil
}

// pendingFor returns the pending additions to c's tensor, creating them
// after checking c's shape, dtype and total_bytes against the tensor's
// other pieces, or for a new tensor against numel times its dtype's size
// and the byte limit (bytes holds the float32 bytes so far and grows by a
// new tensor's).
func (a *Assembler) pendingFor(adds map[string]*pending, c *TensorChunk, bytes *int64) (*pending, error) {
	name := c.GetName()
	if p, ok := adds[name]; ok {
		return p, sameHeader(name, p, c)
	}
	if t, ok := a.tensors[name]; ok {
		p := &pending{shape: t.t.Shape, dtype: t.t.DType, total: t.total, first: t.first}
		adds[name] = p
		return p, sameHeader(name, p, c)
	}
	size := int64(dtypeSize(c.GetDtype()))
	if size == 0 {
		return nil, fmt.Errorf("%w: tensor %s of unknown dtype %d", ErrChunk, name, c.GetDtype())
	}
	mem, err := tensorBytes(c.GetShape(), a.maxBytes())
	if err != nil {
		return nil, fmt.Errorf("tensor %s: %w", name, err)
	}
	if total := mem / elemBytes * size; c.GetTotalBytes() != total {
		return nil, fmt.Errorf("%w: tensor %s of shape %v as %s has total_bytes %d, want %d", ErrChunk, name, c.GetShape(), c.GetDtype(), c.GetTotalBytes(), total)
	}
	if mem > a.maxBytes()-*bytes {
		return nil, fmt.Errorf("%w: tensor %s of %d bytes takes version %d past %d bytes", ErrChunk, name, mem, a.version, a.maxBytes())
	}
	*bytes += mem
	p := &pending{shape: c.GetShape(), dtype: c.GetDtype(), total: c.GetTotalBytes(), isNew: true, first: [2]int{math.MaxInt, 0}}
	adds[name] = p
	return p, nil
}

// sameHeader checks that c repeats the shape, dtype and total_bytes of
// its tensor's earlier pieces p.
func sameHeader(name string, p *pending, c *TensorChunk) error {
	if !slices.Equal(c.GetShape(), p.shape) || c.GetDtype() != p.dtype || c.GetTotalBytes() != p.total {
		return fmt.Errorf("%w: tensor %s piece of shape %v, %s and %d bytes, earlier pieces %v, %s and %d",
			ErrChunk, name, c.GetShape(), c.GetDtype(), c.GetTotalBytes(), p.shape, p.dtype, p.total)
	}
	return nil
}

// tensorBytes is 4·numel for shape (a nil shape is a scalar): its bytes
// as float32, or an
// ErrChunk for a negative dimension or a size over max.
func tensorBytes(shape []int64, max int64) (int64, error) {
	n := int64(elemBytes)
	for _, d := range shape {
		if d < 0 {
			return 0, fmt.Errorf("%w: shape %v has a negative dimension", ErrChunk, shape)
		}
		if d > 0 && n > max/d {
			return 0, fmt.Errorf("%w: shape %v is over %d bytes", ErrChunk, shape, max)
		}
		n *= d
	}
	if n > max || n/elemBytes > math.MaxInt {
		return 0, fmt.Errorf("%w: shape %v is over %d bytes", ErrChunk, shape, max)
	}
	return n, nil
}

// addPiece checks c's byte range (overflow-safe) against the tensor's
// received ranges in t (nil for a new tensor) and those already pending,
// then records it.
func (p *pending) addPiece(t *partial, c *TensorChunk, pos [2]int) error {
	off, n, size := c.GetOffset(), int64(len(c.GetData())), int64(dtypeSize(p.dtype))
	if off < 0 || off%size != 0 || n%size != 0 || off > p.total || n > p.total-off {
		return fmt.Errorf("%w: tensor %s piece at offset %d with %d bytes outside [0, %d) or not whole %s elements", ErrChunk, c.GetName(), off, n, p.total, p.dtype)
	}
	s := span{off, off + n}
	if t != nil && overlaps(t.spans, s) || overlaps(p.spans, s) {
		return fmt.Errorf("%w: tensor %s bytes [%d, %d) overlap bytes already received", ErrChunk, c.GetName(), s.lo, s.hi)
	}
	p.spans = insertSpan(p.spans, s)
	p.bytes += n
	if pos[0] < p.first[0] || (pos[0] == p.first[0] && pos[1] < p.first[1]) {
		p.first = pos
	}
	return nil
}

// checkComplete checks that, with adds applied by the version's last
// chunk, every tensor has all its bytes.
func (a *Assembler) checkComplete(adds map[string]*pending) error {
	for name, t := range a.tensors {
		if p := adds[name]; p == nil && t.received != t.total {
			return fmt.Errorf("%w: last chunk leaves tensor %s with %d of %d bytes", ErrChunk, name, t.received, t.total)
		}
	}
	for name, p := range adds {
		got := p.bytes
		if t := a.tensors[name]; t != nil {
			got += t.received
		}
		if got != p.total {
			return fmt.Errorf("%w: last chunk leaves tensor %s with %d of %d bytes", ErrChunk, name, got, p.total)
		}
	}
	return nil
}

// apply adds the checked chunk w to a: its new tensors get their buffers
// in the order w lists them.
func (a *Assembler) apply(w *PolicyWeights, adds map[string]*pending) {
	for _, c := range w.GetTensors() {
		if p, name := adds[c.GetName()], c.GetName(); p.isNew && a.tensors[name] == nil {
			numel := p.total / int64(dtypeSize(p.dtype))
			data, at := a.alloc(int(numel))
			a.tensors[name] = &partial{t: Tensor{Name: name, Shape: slices.Clone(p.shape), Data: data, DType: p.dtype}, total: p.total, at: at}
			a.bytes += numel * elemBytes
		}
	}
	for name, p := range adds {
		t := a.tensors[name]
		for _, s := range p.spans {
			t.spans = insertSpan(t.spans, s)
		}
		t.received += p.bytes
		t.first = p.first
	}
	for _, c := range w.GetTensors() {
		d := c.GetDtype()
		size := dtypeSize(d)
		data, t := c.GetData(), a.tensors[c.GetName()].t.Data[c.GetOffset()/int64(size):]
		decodeAs(d, t[:len(data)/size], data)
	}
	a.seen[w.GetChunkIndex()] = true
}

// alloc returns room for n elements and its index in the arena: the
// arena's next n with MaxBytes set (a version's declared bytes never pass
// it), else a buffer of its own (-1).
func (a *Assembler) alloc(n int) ([]float32, int) {
	if a.MaxBytes <= 0 {
		return make([]float32, n), -1
	}
	if a.arena == nil {
		if n := a.MaxBytes / elemBytes; int64(cap(a.Buffer)) >= n {
			a.arena = a.Buffer[:0:n]
		} else {
			a.arena = make([]float32, 0, n)
		}
	}
	at := len(a.arena)
	a.arena = a.arena[:at+n]
	return a.arena[at : at+n : at+n], at
}

// overlaps reports whether s shares a byte with one of the sorted,
// disjoint spans. An empty s overlaps nothing.
func overlaps(spans []span, s span) bool {
	i := sort.Search(len(spans), func(i int) bool { return spans[i].hi > s.lo })
	return s.lo < s.hi && i < len(spans) && spans[i].lo < s.hi
}

// insertSpan inserts s, which overlaps none of spans, keeping them sorted
// and merging adjacent ones. Empty spans are dropped.
func insertSpan(spans []span, s span) []span {
	if s.lo == s.hi {
		return spans
	}
	i := sort.Search(len(spans), func(i int) bool { return spans[i].lo >= s.hi })
	if i > 0 && spans[i-1].hi == s.lo {
		s.lo = spans[i-1].lo
		i--
		spans = slices.Delete(spans, i, i+1)
	}
	if i < len(spans) && spans[i].lo == s.hi {
		s.hi = spans[i].hi
		spans = slices.Delete(spans, i, i+1)
	}
	return slices.Insert(spans, i, s)
}

func (a *Assembler) maxBytes() int64 {
	if a.MaxBytes > 0 {
		return a.MaxBytes
	}
	return DefaultMaxBytes
}

// Done reports whether every chunk of the current version has arrived;
// then every tensor is complete.
func (a *Assembler) Done() bool {
	return a.seen != nil && int32(len(a.seen)) == a.count
}

// Version is the version being assembled.
func (a *Assembler) Version() int64 { return a.version }

// Flat returns the data of every assembled tensor, one after another in
// the order Tensors lists them, or ErrChunk if the snapshot is incomplete.
// With MaxBytes set and the tensors received in the sender's order (one
// ordered stream) it is the version's one buffer, shared with Tensors'
// data and never written again; otherwise a copy. The result belongs to
// the caller.
func (a *Assembler) Flat() ([]float32, error) {
	ts, err := a.Tensors()
	if err != nil {
		return nil, err
	}
	at := 0
	for _, t := range ts {
		if a.tensors[t.Name].at != at {
			at = -1
			break
		}
		at += len(t.Data)
	}
	if at == len(a.arena) {
		return a.arena, nil
	}
	flat := make([]float32, 0, a.bytes/elemBytes)
	for _, t := range ts {
		flat = append(flat, t.Data...)
	}
	return flat, nil
}

// Tensors returns the assembled tensors in the sender's order, or ErrChunk
// if the snapshot is incomplete. The result belongs to the caller.
func (a *Assembler) Tensors() ([]Tensor, error) {
	if !a.Done() {
		return nil, fmt.Errorf("%w: %d of %d chunks of version %d", ErrChunk, len(a.seen), a.count, a.version)
	}
	order := make([]*partial, 0, len(a.tensors))
	for _, t := range a.tensors {
		order = append(order, t)
	}
	slices.SortFunc(order, func(x, y *partial) int {
		return cmp.Or(cmp.Compare(x.first[0], y.first[0]), cmp.Compare(x.first[1], y.first[1]))
	})
	out := make([]Tensor, 0, len(order))
	for _, t := range order {
		if t.received != t.total {
			return nil, fmt.Errorf("%w: tensor %s has %d of %d bytes", ErrChunk, t.t.Name, t.received, t.total)
		}
		out = append(out, t.t)
	}
	return out, nil
}
