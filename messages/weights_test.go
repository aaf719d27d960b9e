package messages

import (
	"errors"
	"fmt"
	"maps"
	"math"
	"slices"
	"strings"
	"testing"

	"github.com/mgrpo/mgrpo/internal/bf16"
)

// refTensors is the snapshot the Assembler tests send: 28 bytes in 4
// chunks of 8 bytes (a[0,8) a[8,16) b[0,8) b[8,12)).
func refTensors() []Tensor {
	return []Tensor{
		{Name: "a", Shape: []int64{2, 2}, Data: []float32{1, 2, 3, 4}},
		{Name: "b", Shape: []int64{3}, Data: []float32{5, 6, 7}},
	}
}

func chunk(v int64, idx, cnt int32, pieces ...*TensorChunk) *PolicyWeights {
	return &PolicyWeights{Version: v, ChunkIndex: idx, ChunkCount: cnt, Tensors: pieces}
}

func piece(name string, shape []int64, total, off int64, data ...float32) *TensorChunk {
	return &TensorChunk{Name: name, Shape: shape, TotalBytes: total, Offset: off, Data: encodeFloats(data)}
}

// piece16 is a piece of a tensor that travels as bf16.
func piece16(name string, shape []int64, total, off int64, data ...float32) *TensorChunk {
	return &TensorChunk{Name: name, Shape: shape, TotalBytes: total, Offset: off, Data: encodeAs(DType_BF16, data), Dtype: DType_BF16}
}

// TestAssemblerRejectsBadChunks sends `before` correct chunks of version 5,
// then one bad chunk, then the remaining correct chunks: the bad chunk must
// be an ErrChunk that leaves the assembler as it was, so the correct
// chunks still assemble exactly refTensors.
func TestAssemblerRejectsBadChunks(t *testing.T) {
	a22, b3 := []int64{2, 2}, []int64{3}
	cases := []struct {
		name   string
		before int // correct chunks added before the bad one
		max    int64
		bad    *PolicyWeights
	}{
		// bug 1: overlapping or repeated byte ranges
		{"repeated range", 1, 0, chunk(5, 1, 4, piece("a", a22, 16, 0, 1, 2))},
		{"overlapping range", 1, 0, chunk(5, 1, 4, piece("a", a22, 16, 4, 2, 3))},
		{"overlap within a chunk", 0, 0, chunk(5, 0, 4, piece("a", a22, 16, 0, 1, 2), piece("a", a22, 16, 4, 2, 3))},
		{"range covering a received one", 2, 0, chunk(5, 2, 4, piece("a", a22, 16, 0, 1, 2, 3, 4))},
		// bug 2: offsets whose end overflows int64, and other bad offsets
		{"offset near MaxInt64", 1, 0, chunk(5, 1, 4, piece("a", a22, 16, math.MaxInt64-3, 3, 4))},
		{"offset MaxInt64 aligned", 1, 0, chunk(5, 1, 4, piece("a", a22, 16, math.MaxInt64-7, 3, 4))},
		{"negative offset", 1, 0, chunk(5, 1, 4, piece("a", a22, 16, -8, 3, 4))},
		{"misaligned offset", 1, 0, chunk(5, 1, 4, piece("a", a22, 16, 6, 3, 4))},
		{"data past the end", 1, 0, chunk(5, 1, 4, piece("a", a22, 16, 8, 3, 4, 9))},
		{"ragged data", 1, 0, chunk(5, 1, 4, &TensorChunk{Name: "a", Shape: a22, TotalBytes: 16, Offset: 8, Data: []byte{1, 2, 3}})},
		// bug 3: sizes that must be refused before any allocation
		{"total 1<<62", 1, 0, chunk(5, 1, 4, piece("c", []int64{1 << 60}, 1<<62, 0))},
		{"total 32 GiB from 4 bytes", 1, 0, chunk(5, 1, 4, piece("c", []int64{1 << 33}, 1<<35, 0, 1))},
		{"shape product overflows", 1, 0, chunk(5, 1, 4, piece("c", []int64{1 << 31, 1 << 31, 1 << 31}, 0, 0))},
		{"negative dim", 1, 0, chunk(5, 1, 4, piece("c", []int64{-1, -4}, 16, 0, 1))},
		{"negative total", 1, 0, chunk(5, 1, 4, piece("c", []int64{1}, -4, 0))},
		{"version over MaxBytes", 3, 28, chunk(5, 3, 4, piece("b", b3, 12, 8, 7), piece("c", []int64{1}, 4, 0, 1))},
		{"new version over MaxBytes", 1, 28, chunk(6, 0, 1, piece("c", []int64{8}, 32, 0, 1, 2, 3, 4, 5, 6, 7, 8))},
		// bug 4: rejected chunks must not change the state
		{"newer version, zero chunk count", 1, 0, chunk(6, 0, 0)},
		{"newer version, bad piece", 1, 0, chunk(6, 0, 1, piece("a", a22, 16, 32, 1))},
		{"newer version, negative index", 1, 0, chunk(6, -1, 2)},
		{"later tensor fails", 1, 0, chunk(5, 1, 4, piece("a", a22, 16, 8, 3, 4), piece("b", b3, 12, 16, 9))},
		{"first chunk fails", 0, 0, chunk(5, 0, 4, piece("a", a22, 16, 0, 1, 2), piece("b", b3, 12, 12, 9))},
		{"first chunk, zero count", 0, 0, chunk(5, 0, 0)},
		{"wrong chunk count", 1, 0, chunk(5, 1, 3, piece("a", a22, 16, 8, 3, 4))},
		{"index past count", 1, 0, chunk(5, 4, 4)},
		{"duplicate index", 1, 0, chunk(5, 0, 4, piece("a", a22, 16, 8, 3, 4))},
		{"older version", 1, 0, chunk(4, 1, 4, piece("a", a22, 16, 8, 3, 4))},
		{"last chunk leaves a gap", 3, 0, chunk(5, 3, 4)},
		// bug 5: shape and total_bytes must agree with the first piece and each other
		{"shape differs from first piece", 1, 0, chunk(5, 1, 4, piece("a", []int64{4}, 16, 8, 3, 4))},
		{"total differs from first piece", 1, 0, chunk(5, 1, 4, piece("a", a22, 32, 8, 3, 4))},
		{"total differs within a chunk", 0, 0, chunk(5, 0, 4, piece("a", a22, 16, 0, 1), piece("a", a22, 32, 4, 2))},
		{"shape [100] with 1 float", 1, 0, chunk(5, 1, 4, piece("c", []int64{100}, 4, 0, 1))},
		{"scalar with 4 floats", 1, 0, chunk(5, 1, 4, piece("c", nil, 16, 0, 1, 2, 3, 4))},
		// bf16: the dtype is the tensor's, its size sets total_bytes and alignment
		{"dtype differs from first piece", 1, 0, chunk(5, 1, 4, piece16("a", a22, 16, 8, 3, 4))},
		{"dtype differs within a chunk", 0, 0, chunk(5, 0, 4, piece16("c", []int64{4}, 8, 0, 1), piece("c", []int64{4}, 8, 2, 2))},
		{"unknown dtype", 1, 0, chunk(5, 1, 4, &TensorChunk{Name: "c", Shape: []int64{1}, TotalBytes: 4, Data: encodeFloats([]float32{1}), Dtype: 7})},
		{"bf16 with a float32 total", 1, 0, chunk(5, 1, 4, piece16("c", []int64{2}, 8, 0, 1, 2))},
		{"bf16 ragged data", 1, 0, chunk(5, 1, 4, &TensorChunk{Name: "c", Shape: []int64{2}, TotalBytes: 4, Data: []byte{1, 2, 3}, Dtype: DType_BF16})},
		{"bf16 misaligned offset", 1, 0, chunk(5, 1, 4, piece16("c", []int64{2}, 4, 1, 1))},
		{"bf16 version over MaxBytes", 3, 28, chunk(5, 3, 4, piece("b", b3, 12, 8, 7), piece16("c", []int64{1}, 2, 0, 1))},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			chunks := ChunkWeights(meta(), 5, refTensors(), 8)
			if len(chunks) != 4 {
				t.Fatalf("%d reference chunks, want 4", len(chunks))
			}
			a := Assembler{MaxBytes: tc.max}
			for _, c := range chunks[:tc.before] {
				if _, err := a.Add(c); err != nil {
					t.Fatalf("correct chunk %d: %v", c.ChunkIndex, err)
				}
			}
			was := state(&a)
			done, err := a.Add(tc.bad)
			if !errors.Is(err, ErrChunk) || done {
				t.Fatalf("bad chunk: done=%v err=%v, want ErrChunk", done, err)
			}
			checkSameState(t, &a, was)
			for i, c := range chunks[tc.before:] {
				done, err := a.Add(c)
				if err != nil || done != (tc.before+i == len(chunks)-1) {
					t.Fatalf("correct chunk %d after the bad one: done=%v err=%v", c.ChunkIndex, done, err)
				}
			}
			checkTensors(t, &a, refTensors())
		})
	}
}

// checkTensors asserts that a holds exactly want.
func checkTensors(t *testing.T, a *Assembler, want []Tensor) {
	t.Helper()
	got, err := a.Tensors()
	if err != nil {
		t.Fatalf("Tensors: %v", err)
	}
	if len(got) != len(want) {
		t.Fatalf("%d tensors, want %d", len(got), len(want))
	}
	for i := range want {
		g, w := got[i], want[i]
		if g.Name != w.Name || !slices.Equal(g.Shape, w.Shape) || !slices.Equal(g.Data, w.Data) {
			t.Fatalf("tensor %d = %s%v %v, want %s%v %v", i, g.Name, g.Shape, g.Data, w.Name, w.Shape, w.Data)
		}
	}
}

// TestAssemblerMaxBytes checks that a snapshot of exactly MaxBytes is
// accepted and that a reset to a newer version keeps MaxBytes.
func TestAssemblerMaxBytes(t *testing.T) {
	a := Assembler{MaxBytes: 28}
	for v := int64(1); v <= 2; v++ {
		for _, c := range ChunkWeights(meta(), v, refTensors(), 8) {
			if _, err := a.Add(c); err != nil {
				t.Fatalf("version %d: %v", v, err)
			}
		}
		checkTensors(t, &a, refTensors())
	}
	if a.MaxBytes != 28 {
		t.Errorf("MaxBytes = %d after a new version, want 28", a.MaxBytes)
	}
	big := ChunkWeights(meta(), 3, []Tensor{{Name: "w", Shape: []int64{8}, Data: make([]float32, 8)}}, 64)
	if _, err := a.Add(big[0]); !errors.Is(err, ErrChunk) || a.Version() != 2 {
		t.Errorf("32 bytes over MaxBytes 28: err=%v version=%d, want ErrChunk and version 2", err, a.Version())
	}
}

// state renders everything an Assembler holds as a string, tensor data as
// bit patterns (so a NaN equals itself, which reflect.DeepEqual would not
// allow): two equal states render equally.
func state(a *Assembler) string {
	var b strings.Builder
	seen := slices.Sorted(maps.Keys(a.seen))
	fmt.Fprintf(&b, "max %d version %d count %d bytes %d seen %v nil %v|", a.MaxBytes, a.version, a.count, a.bytes, seen, a.seen == nil)
	for _, name := range slices.Sorted(maps.Keys(a.tensors)) {
		p := a.tensors[name]
		bits := make([]uint32, len(p.t.Data))
		for i, v := range p.t.Data {
			bits[i] = math.Float32bits(v)
		}
		fmt.Fprintf(&b, "%q %q %v %v %v total %d first %v spans %v received %d|", name, p.t.Name, p.t.Shape, p.t.DType, bits, p.total, p.first, p.spans, p.received)
	}
	return b.String()
}

// checkSameState asserts that a is still in the state was (from state).
func checkSameState(t *testing.T, a *Assembler, was string) {
	t.Helper()
	if now := state(a); now != was {
		t.Fatalf("a rejected chunk changed the assembler:\n%s\nwas\n%s", now, was)
	}
}

// FuzzAssembler feeds chunk sequences decoded from random bytes: Add must
// never panic, a rejected chunk must leave the assembler unchanged, and a
// finished snapshot must hold tensors whose data fit their shapes.
func FuzzAssembler(f *testing.F) {
	f.Add([]byte{0, 0, 1, 1, 0, 1, 4, 16, 0, 16, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16})
	f.Add([]byte{1, 0, 2, 1, 0, 1, 2, 8, 0, 4, 1, 2, 3, 4, 1, 1, 2, 1, 0, 1, 2, 8, 4, 4, 5, 6, 7, 8})
	f.Add([]byte{2, 255, 0, 1, 2, 1, 255, 255, 251, 8, 1, 2, 3, 4, 5, 6, 7, 8})
	f.Fuzz(func(t *testing.T, in []byte) {
		a := Assembler{MaxBytes: 1 << 12}
		for r := (&byteReader{b: in}); len(r.b) > 0; {
			w := fuzzChunk(r)
			was := state(&a)
			if done, err := a.Add(w); err != nil {
				checkSameState(t, &a, was)
			} else if done {
				checkDone(t, &a)
			}
		}
	})
}

// checkDone asserts that a finished snapshot's tensors fit their shapes.
func checkDone(t *testing.T, a *Assembler) {
	t.Helper()
	ts, err := a.Tensors()
	if err != nil {
		t.Fatalf("Done but Tensors: %v", err)
	}
	for _, x := range ts {
		n := int64(1)
		for _, d := range x.Shape {
			n *= d
		}
		if int64(len(x.Data)) != n {
			t.Fatalf("tensor %s of shape %v holds %d floats", x.Name, x.Shape, len(x.Data))
		}
	}
}

// byteReader hands out fuzz bytes, zero once they run out.
type byteReader struct{ b []byte }

func (r *byteReader) next() byte {
	if len(r.b) == 0 {
		return 0
	}
	c := r.b[0]
	r.b = r.b[1:]
	return c
}

// int64 maps a byte to a small value or, for 250 and up, an extreme one.
func (r *byteReader) int64() int64 {
	extremes := []int64{math.MaxInt64, math.MaxInt64 - 3, math.MinInt64, -4, 1 << 62, 1 << 33}
	if c := r.next(); c >= 250 {
		return extremes[c-250]
	} else {
		return int64(c)
	}
}

// fuzzChunk decodes one PolicyWeights chunk with up to 3 pieces of
// tensors a, b, c.
func fuzzChunk(r *byteReader) *PolicyWeights {
	w := &PolicyWeights{Version: int64(r.next() % 3), ChunkIndex: int32(int8(r.next())), ChunkCount: int32(int8(r.next()))}
	for range r.next() % 4 {
		c := &TensorChunk{Name: string(rune('a' + r.next()%3))}
		for range r.next() % 3 {
			c.Shape = append(c.Shape, r.int64())
		}
		c.TotalBytes, c.Offset = r.int64(), r.int64()
		c.Data = make([]byte, r.next()%40)
		for i := range c.Data {
			c.Data[i] = r.next()
		}
		c.Dtype = DType(r.next() % 3) // float32, bf16 or unknown
		w.Tensors = append(w.Tensors, c)
	}
	return w
}

// TestAssemblerStateWithNaN: weights may hold NaN; a rejected chunk after
// one leaves a state that still compares equal (the fuzz target's check
// used reflect.DeepEqual, for which NaN differs from itself).
func TestAssemblerStateWithNaN(t *testing.T) {
	nan := float32(math.NaN())
	chunks := ChunkWeights(meta(), 1, []Tensor{{Name: "w", Shape: []int64{4}, Data: []float32{nan, 1, 2, 3}}}, 8)
	if len(chunks) != 2 {
		t.Fatalf("%d chunks, want 2", len(chunks))
	}
	var a Assembler
	if _, err := a.Add(chunks[0]); err != nil {
		t.Fatal(err)
	}
	was := state(&a)
	if _, err := a.Add(chunks[0]); !errors.Is(err, ErrChunk) {
		t.Fatalf("chunk 0 twice: %v, want ErrChunk", err)
	}
	checkSameState(t, &a, was)
	if done, err := a.Add(chunks[1]); err != nil || !done {
		t.Fatalf("chunk 1: done %v, %v", done, err)
	}
	ts, err := a.Tensors()
	if err != nil || len(ts) != 1 || !math.IsNaN(float64(ts[0].Data[0])) || ts[0].Data[3] != 3 {
		t.Errorf("Tensors = %v, %v", ts, err)
	}
}

// TestFlat checks that Flat lists every tensor's data in the sender's
// order, whichever order the chunks came in, with and without MaxBytes
// (one shared buffer, or a copy).
func TestFlat(t *testing.T) {
	want := []float32{1, 2, 3, 4, 5, 6, 7}
	for _, tc := range []struct {
		name  string
		max   int64
		order []int
	}{
		{"in order, one buffer", 28, []int{0, 1, 2, 3}},
		{"in order, room to spare", 1 << 10, []int{0, 1, 2, 3}},
		{"out of order, one buffer", 28, []int{3, 1, 0, 2}},
		{"in order, no MaxBytes", 0, []int{0, 1, 2, 3}},
		{"out of order, no MaxBytes", 0, []int{2, 3, 0, 1}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			chunks := ChunkWeights(meta(), 1, refTensors(), 8)
			a := Assembler{MaxBytes: tc.max}
			if _, err := a.Flat(); !errors.Is(err, ErrChunk) {
				t.Fatalf("Flat before any chunk: %v, want ErrChunk", err)
			}
			for _, i := range tc.order {
				if _, err := a.Add(chunks[i]); err != nil {
					t.Fatal(err)
				}
			}
			got, err := a.Flat()
			if err != nil || !slices.Equal(got, want) {
				t.Fatalf("Flat = %v, %v; want %v", got, err, want)
			}
			checkTensors(t, &a, refTensors())
		})
	}
}

// TestAssemblerBuffer: a version is assembled in Buffer when it has room
// for MaxBytes, whatever it held, and out of order too; a Buffer without
// that room is left alone. A newer version that discards a partial one
// keeps Buffer.
func TestAssemblerBuffer(t *testing.T) {
	want := []float32{1, 2, 3, 4, 5, 6, 7}
	for _, tc := range []struct {
		name  string
		room  int
		order []int
		used  bool
	}{
		{"room for MaxBytes", 7, []int{0, 1, 2, 3}, true},
		{"more room", 9, []int{0, 1, 2, 3}, true},
		{"out of order", 7, []int{3, 1, 0, 2}, true},
		{"too small", 6, []int{0, 1, 2, 3}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			buf := slices.Repeat([]float32{float32(math.NaN())}, tc.room)
			a := Assembler{MaxBytes: 28, Buffer: buf[:0]}
			if _, err := a.Add(ChunkWeights(meta(), 1, refTensors(), 8)[0]); err != nil { // a partial version 1
				t.Fatal(err)
			}
			for _, i := range tc.order {
				if _, err := a.Add(ChunkWeights(meta(), 2, refTensors(), 8)[i]); err != nil {
					t.Fatal(err)
				}
			}
			got, err := a.Flat()
			if err != nil || !slices.Equal(got, want) {
				t.Fatalf("Flat = %v, %v; want %v", got, err, want)
			}
			checkTensors(t, &a, refTensors())
			if in := &got[0] == &buf[0]; in != tc.used && tc.order[0] == 0 {
				t.Errorf("assembled in Buffer: %v, want %v", in, tc.used)
			}
			if touched := !math.IsNaN(float64(buf[0])); touched != tc.used {
				t.Errorf("Buffer written: %v, want %v", touched, tc.used)
			}
		})
	}
}

// TestChunkWeightsLarge: a snapshot big enough to be encoded on several
// goroutines (4 M elements, bf16 and float32 tensors) travels as the
// element-by-element encoding of each piece, and assembles back exactly
// (bf16 pieces to their rounding).
func TestChunkWeightsLarge(t *testing.T) {
	tensors := []Tensor{
		{Name: "a", Shape: []int64{1 << 21}, DType: DType_BF16},
		{Name: "b", Shape: []int64{3, 1 << 19}},
		{Name: "c", Shape: []int64{1<<19 + 7}, DType: DType_BF16},
	}
	for i := range tensors {
		n := int64(1)
		for _, d := range tensors[i].Shape {
			n *= d
		}
		tensors[i].Data = make([]float32, n)
		for j := range tensors[i].Data {
			tensors[i].Data[j] = float32(math.Sin(float64(i*7919 + j)))
		}
	}
	chunks := ChunkWeights(meta(), 1, tensors, 1<<16)
	byName := map[string]Tensor{}
	for _, x := range tensors {
		byName[x.Name] = x
	}
	a := Assembler{MaxBytes: 4 * (1<<21 + 3<<19 + 1<<19 + 7)}
	for _, c := range chunks {
		for _, p := range c.GetTensors() {
			size := int64(dtypeSize(p.GetDtype()))
			src := byName[p.GetName()].Data[p.GetOffset()/size:][:int64(len(p.GetData()))/size]
			if !slices.Equal(p.GetData(), encodeAs(p.GetDtype(), src)) {
				t.Fatalf("chunk %d, %s at %d: not the encoding of its elements", c.GetChunkIndex(), p.GetName(), p.GetOffset())
			}
		}
		if _, err := a.Add(c); err != nil {
			t.Fatal(err)
		}
	}
	got, err := a.Tensors()
	if err != nil {
		t.Fatal(err)
	}
	for i, g := range got {
		for j, v := range g.Data {
			want := tensors[i].Data[j]
			if tensors[i].DType == DType_BF16 {
				want = bf16.Float32(bf16.Round(want))
			}
			if v != want {
				t.Fatalf("%s[%d] = %v, want %v", g.Name, j, v, want)
			}
		}
	}
}

// TestFloatBytes checks the wire form of float32 data against the
// element-by-element little-endian encoding, both ways, bit for bit
// (NaN payloads and -0 included).
func TestFloatBytes(t *testing.T) {
	x := []float32{0, float32(math.Copysign(0, -1)), 1.5, -3e38, float32(math.Inf(-1)), math.Float32frombits(0x7fc00001), math.SmallestNonzeroFloat32}
	b := floatBytes(x)
	if want := encodeFloats(x); !slices.Equal(b, want) {
		t.Fatalf("floatBytes = %v, want %v", b, want)
	}
	got := make([]float32, len(x))
	decodeFloats(got, b)
	for i := range x {
		if math.Float32bits(got[i]) != math.Float32bits(x[i]) {
			t.Errorf("element %d: %08x, want %08x", i, math.Float32bits(got[i]), math.Float32bits(x[i]))
		}
	}
	if len(floatBytes(nil)) != 0 {
		t.Error("floatBytes(nil) is not empty")
	}
}

// TestBF16Chunks sends tensors as float32 and as bf16, cut at several
// chunk sizes (bf16 pieces of one element; pieces that leave two bytes of
// a chunk unused): the bf16 ones travel in half the bytes and assemble to
// their bf16 rounding exactly (rounding both ways, a tie to even, an
// exact value), the float32 ones bit for bit, each reporting its dtype.
func TestBF16Chunks(t *testing.T) {
	sent := []Tensor{
		{Name: "w", Shape: []int64{2, 3}, Data: []float32{1, 1.00390625, 1.00390625 + 1.0/(1<<20), -2.5, 0.1, 1.01171875}, DType: DType_BF16},
		{Name: "n", Shape: []int64{3}, Data: []float32{0.1, 0.2, 0.3}},
		{Name: "v", Shape: []int64{1}, Data: []float32{-0.7}, DType: DType_BF16},
	}
	want := []Tensor{
		{Name: "w", Shape: []int64{2, 3}, Data: []float32{1, 1, 1.0078125, -2.5, 0.10009765625, 1.015625}, DType: DType_BF16},
		sent[1],
		{Name: "v", Shape: []int64{1}, Data: []float32{-0.69921875}, DType: DType_BF16},
	}
	for _, size := range []int{4, 6, 8, 64} {
		chunks := ChunkWeights(meta(), 1, sent, size)
		var bytes int
		for _, c := range chunks {
			used := 0
			for _, p := range c.GetTensors() {
				used += len(p.GetData())
			}
			if used > size/4*4 {
				t.Errorf("chunk size %d: a chunk of %d bytes", size, used)
			}
			bytes += used
		}
		if bytes != 2*6+4*3+2*1 {
			t.Errorf("chunk size %d: %d bytes sent, want 26", size, bytes)
		}
		a := Assembler{MaxBytes: 4 * 10}
		for i := len(chunks) - 1; i >= 0; i-- {
			if _, err := a.Add(chunks[i]); err != nil {
				t.Fatalf("chunk size %d: %v", size, err)
			}
		}
		checkTensors(t, &a, want)
		got, _ := a.Tensors()
		for i := range want {
			if got[i].DType != want[i].DType {
				t.Errorf("chunk size %d: tensor %s reports %s, want %s", size, got[i].Name, got[i].DType, want[i].DType)
			}
		}
	}
}

// BenchmarkChunkWeights cuts a snapshot of 32 M weights (128 MB as
// float32) into 1 MiB chunks, as float32 (no copy on a little-endian
// machine) and as bf16 (each weight rounded). MB/s counts float32 bytes.
func BenchmarkChunkWeights(b *testing.B) {
	data := make([]float32, 32<<20)
	for i := range data {
		data[i] = float32(i) * 1e-7
	}
	for _, d := range []DType{DType_FLOAT32, DType_BF16} {
		b.Run("dtype="+d.String(), func(b *testing.B) {
			tensors := []Tensor{{Name: "w", Shape: []int64{int64(len(data))}, Data: data, DType: d}}
			b.SetBytes(int64(4 * len(data)))
			for range b.N {
				ChunkWeights(meta(), 1, tensors, 1<<20)
			}
		})
	}
}
