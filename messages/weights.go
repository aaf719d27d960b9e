package messages

import (
	"cmp"
	"encoding/binary"
	"fmt"
	"math"
	"slices"
)

// Tensor is a named float32 tensor as Go values.
type Tensor struct {
	Name  string
	Shape []int64 // e.g. [out, in] for a linear weight
	Data  []float32
}

// ChunkWeights splits a snapshot into PolicyWeights messages whose tensor
// data total at most maxChunkBytes each (a tensor larger than that is
// split across chunks). Every chunk gets a DeriveMeta copy of meta. The
// tensors are only read. maxChunkBytes must be at least 4.
func ChunkWeights(meta *StepMeta, version int64, tensors []Tensor, maxChunkBytes int) []*PolicyWeights {
	if maxChunkBytes < 4 {
		panic(fmt.Sprintf("messages: ChunkWeights maxChunkBytes=%d < 4", maxChunkBytes))
	}
	limit := maxChunkBytes / 4 * 4 // whole float32s per chunk
	var chunks []*PolicyWeights
	cur := &PolicyWeights{Meta: DeriveMeta(meta), Version: version}
	used := 0
	flush := func() {
		chunks = append(chunks, cur)
		cur = &PolicyWeights{Meta: DeriveMeta(meta), Version: version}
		used = 0
	}
	for _, t := range tensors {
		total := int64(4 * len(t.Data))
		for off := 0; ; {
			if used == limit {
				flush()
			}
			n := min(len(t.Data)-off, (limit-used)/4)
			cur.Tensors = append(cur.Tensors, &TensorChunk{
				Name: t.Name, Shape: append([]int64(nil), t.Shape...),
				Offset: int64(4 * off), Data: encodeFloats(t.Data[off : off+n]), TotalBytes: total,
			})
			used += 4 * n
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
	return chunks
}

func encodeFloats(x []float32) []byte {
	b := make([]byte, 4*len(x))
	for i, v := range x {
		binary.LittleEndian.PutUint32(b[4*i:], math.Float32bits(v))
	}
	return b
}

// Assembler rebuilds a snapshot from PolicyWeights chunks arriving in any
// order. It is not safe for concurrent use; an actor owns one.
type Assembler struct {
	version  int64
	count    int32
	seen     map[int32]bool
	tensors  map[string]*Tensor
	order    []string
	first    map[string][2]int // (chunk index, position) of a tensor's first piece
	received map[string]int64  // bytes received per tensor
}

// Add takes one chunk (only read, never kept). It returns true once every
// chunk of the version has arrived. A chunk of a newer version discards a
// partial older snapshot; one of an older version is an ErrChunk.
func (a *Assembler) Add(w *PolicyWeights) (bool, error) {
	if a.seen == nil || w.GetVersion() > a.version {
		*a = Assembler{version: w.GetVersion(), count: w.GetChunkCount(), seen: map[int32]bool{}, tensors: map[string]*Tensor{}, first: map[string][2]int{}, received: map[string]int64{}}
	}
	switch {
	case w.GetVersion() < a.version:
		return false, fmt.Errorf("%w: version %d while assembling %d", ErrChunk, w.GetVersion(), a.version)
	case w.GetChunkCount() != a.count || w.GetChunkIndex() < 0 || w.GetChunkIndex() >= a.count:
		return false, fmt.Errorf("%w: chunk %d of %d, want of %d", ErrChunk, w.GetChunkIndex(), w.GetChunkCount(), a.count)
	case a.seen[w.GetChunkIndex()]:
		return false, fmt.Errorf("%w: chunk %d of version %d twice", ErrChunk, w.GetChunkIndex(), a.version)
	}
	for i, c := range w.GetTensors() {
		if err := a.addTensor(c); err != nil {
			return false, err
		}
		pos := [2]int{int(w.GetChunkIndex()), i}
		if f, ok := a.first[c.GetName()]; !ok || pos[0] < f[0] || (pos[0] == f[0] && pos[1] < f[1]) {
			a.first[c.GetName()] = pos
		}
	}
	a.seen[w.GetChunkIndex()] = true
	return a.Done(), nil
}

func (a *Assembler) addTensor(c *TensorChunk) error {
	t, ok := a.tensors[c.GetName()]
	if !ok {
		if c.GetTotalBytes()%4 != 0 || c.GetTotalBytes() < 0 {
			return fmt.Errorf("%w: tensor %s has %d bytes", ErrChunk, c.GetName(), c.GetTotalBytes())
		}
		t = &Tensor{Name: c.GetName(), Shape: append([]int64(nil), c.GetShape()...), Data: make([]float32, c.GetTotalBytes()/4)}
		a.tensors[c.GetName()] = t
		a.order = append(a.order, c.GetName())
	}
	off, data := c.GetOffset(), c.GetData()
	if off%4 != 0 || len(data)%4 != 0 || off < 0 || off+int64(len(data)) > int64(4*len(t.Data)) {
		return fmt.Errorf("%w: tensor %s bytes [%d, %d) outside [0, %d)", ErrChunk, c.GetName(), off, off+int64(len(data)), 4*len(t.Data))
	}
	for i := 0; i < len(data); i += 4 {
		t.Data[(off+int64(i))/4] = math.Float32frombits(binary.LittleEndian.Uint32(data[i:]))
	}
	a.received[c.GetName()] += int64(len(data))
	return nil
}

// Done reports whether every chunk of the current version has arrived.
func (a *Assembler) Done() bool {
	return a.seen != nil && int32(len(a.seen)) == a.count
}

// Version is the version being assembled.
func (a *Assembler) Version() int64 { return a.version }

// Tensors returns the assembled tensors in the sender's order, or ErrChunk
// if the snapshot is incomplete. The result belongs to the caller.
func (a *Assembler) Tensors() ([]Tensor, error) {
	if !a.Done() {
		return nil, fmt.Errorf("%w: %d of %d chunks of version %d", ErrChunk, len(a.seen), a.count, a.version)
	}
	order := slices.Clone(a.order)
	slices.SortFunc(order, func(x, y string) int {
		fx, fy := a.first[x], a.first[y]
		return cmp.Or(cmp.Compare(fx[0], fy[0]), cmp.Compare(fx[1], fy[1]))
	})
	out := make([]Tensor, 0, len(order))
	for _, name := range order {
		t := a.tensors[name]
		if a.received[name] != int64(4*len(t.Data)) {
			return nil, fmt.Errorf("%w: tensor %s has %d of %d bytes", ErrChunk, name, a.received[name], 4*len(t.Data))
		}
		out = append(out, *t)
	}
	return out, nil
}
