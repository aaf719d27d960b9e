package messages

import (
	"bytes"
	"testing"
	"unsafe"

	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
)

// wireCases are PolicyWeights chunks of every shape the weight port
// serves, and a few it never does (unknown fields, negative fields).
func wireCases() map[string]*PolicyWeights {
	meta := NewMeta("run", 3, "weights/7", 7)
	meta.Trace = map[string]string{"traceparent": "00-abc-def-01", "tracestate": "k=v", "z": "", "a": "1"}
	tensors := []Tensor{
		{Name: "model.embed_tokens.weight", Shape: []int64{5, 3}, Data: []float32{1, -2, 3.5, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15}},
		{Name: "model.norm.weight", Shape: []int64{3}, Data: []float32{0.5, 0.25, -0}},
		{Name: "lm_head.weight", Shape: []int64{2, 3}, Data: []float32{1e-3, 2, 3, 4, 5, 6}, DType: DType_BF16},
	}
	out := map[string]*PolicyWeights{"empty": {}}
	for i, w := range ChunkWeights(meta, 7, tensors, 16) {
		out["chunk "+string(rune('a'+i))] = w
	}
	odd := &PolicyWeights{Meta: &StepMeta{}, Version: -1, ChunkIndex: -2, ChunkCount: 1 << 30, Tensors: []*TensorChunk{
		{Name: "no data", Shape: []int64{0, -1}, Offset: -4, TotalBytes: 1, Dtype: DType(-3)},
		{Data: []byte{}},
		{Name: "x", Data: []byte{1, 2, 3}},
	}}
	odd.Tensors[2].ProtoReflect().SetUnknown(protowire.AppendVarint(protowire.AppendTag(nil, 9, protowire.VarintType), 5))
	odd.ProtoReflect().SetUnknown(protowire.AppendString(protowire.AppendTag(nil, 20, protowire.BytesType), "later"))
	out["odd"] = odd
	return out
}

func TestWeightsPiecesMatchMarshal(t *testing.T) {
	for name, w := range wireCases() {
		t.Run(name, func(t *testing.T) {
			pieces, err := WeightsPieces(w)
			if err != nil {
				t.Fatal(err)
			}
			want, err := proto.MarshalOptions{Deterministic: true}.Marshal(w)
			if err != nil {
				t.Fatal(err)
			}
			if got := bytes.Join(pieces, nil); !bytes.Equal(got, want) {
				t.Fatalf("pieces join to\n%x\nproto.Marshal gives\n%x", got, want)
			}
			for _, c := range w.GetTensors() {
				if len(c.GetData()) > 0 && !holds(pieces, c.GetData()) {
					t.Errorf("tensor %q: its data is copied, not a piece of its own", c.GetName())
				}
			}
		})
	}
}

// holds reports whether one of pieces is data itself (the same memory).
func holds(pieces [][]byte, data []byte) bool {
	for _, p := range pieces {
		if len(p) == len(data) && unsafe.SliceData(p) == unsafe.SliceData(data) {
			return true
		}
	}
	return false
}

func TestParseWeightsMatchesUnmarshal(t *testing.T) {
	inputs := map[string][]byte{}
	for name, w := range wireCases() {
		b, err := proto.Marshal(w)
		if err != nil {
			t.Fatal(err)
		}
		inputs[name] = b
	}
	tag := func(b []byte, num protowire.Number, typ protowire.Type) []byte {
		return protowire.AppendTag(b, num, typ)
	}
	chunk := func(fields ...[]byte) []byte {
		return protowire.AppendBytes(tag(nil, weightsTensors, protowire.BytesType), bytes.Join(fields, nil))
	}
	varint := func(num protowire.Number, v uint64) []byte {
		return protowire.AppendVarint(tag(nil, num, protowire.VarintType), v)
	}
	str := func(num protowire.Number, s string) []byte {
		return protowire.AppendString(tag(nil, num, protowire.BytesType), s)
	}
	meta := func(s string) []byte {
		m, _ := proto.Marshal(&StepMeta{RunId: s, Trace: map[string]string{s: s}})
		return protowire.AppendBytes(tag(nil, weightsMeta, protowire.BytesType), m)
	}
	for name, b := range map[string][]byte{
		"unpacked shape":           chunk(varint(chunkShape, 4), varint(chunkShape, 2), str(chunkData, "abcd")),
		"packed and unpacked":      chunk(str(chunkShape, "\x02\x03"), varint(chunkShape, 7)),
		"data before the header":   chunk(str(chunkData, "abcdefgh"), varint(chunkTotalBytes, 8), str(chunkName, "t")),
		"data twice":               chunk(str(chunkData, "ab"), str(chunkData, "cd")),
		"meta twice (merged)":      append(meta("first"), meta("second")...),
		"scalars twice":            append(varint(weightsVersion, 3), varint(weightsVersion, 9)...),
		"version as bytes":         str(weightsVersion, "unknown now"),
		"tensors as a varint":      varint(weightsTensors, 1),
		"name as a varint":         chunk(varint(chunkName, 1)),
		"data as fixed32":          chunk(protowire.AppendFixed32(tag(nil, chunkData, protowire.Fixed32Type), 1)),
		"a group":                  protowire.AppendTag(protowire.AppendVarint(tag(nil, 30, protowire.StartGroupType), 0), 30, protowire.EndGroupType),
		"a group ending wrongly":   protowire.AppendTag(tag(nil, 30, protowire.StartGroupType), 31, protowire.EndGroupType),
		"a stray end of group":     tag(nil, 30, protowire.EndGroupType),
		"field number 0":           {0x02, 0x00},
		"reserved wire type":       {0x0e},
		"truncated varint":         {0x10, 0x80},
		"truncated length":         {0x2a, 0x05, 0x01},
		"truncated chunk":          chunk(str(chunkName, "t"))[:4],
		"bad UTF-8 name":           chunk(str(chunkName, "\xff\xfe")),
		"bad UTF-8 in meta":        protowire.AppendBytes(tag(nil, weightsMeta, protowire.BytesType), str(1, "\xff")),
		"bad packed shape":         chunk(str(chunkShape, "\x80")),
		"negative chunk index":     varint(weightsChunkIndex, uint64(1<<64-5)),
		"huge dtype":               chunk(varint(chunkDType, 1<<40+3)),
		"unknown field in a chunk": chunk(varint(40, 1), str(chunkData, "xy")),
		"a tag of two bytes":       []byte("\xa5\x000000"), // proto.Unmarshal re-encodes an unknown field's tag
	} {
		inputs[name] = b
	}
	for name, b := range inputs {
		t.Run(name, func(t *testing.T) { checkParse(t, b) })
	}
}

// checkParse checks ParseWeights against proto.Unmarshal on b, and that
// the tensors' data it returns are slices of b.
func checkParse(t *testing.T, b []byte) {
	t.Helper()
	want := &PolicyWeights{}
	werr := proto.Unmarshal(b, want)
	got, err := ParseWeights(b)
	if (err == nil) != (werr == nil) {
		t.Fatalf("ParseWeights: %v; proto.Unmarshal: %v", err, werr)
	}
	if err != nil {
		return
	}
	if !proto.Equal(got, want) {
		t.Fatalf("ParseWeights gives\n%v\nproto.Unmarshal gives\n%v", got, want)
	}
	for _, c := range got.GetTensors() {
		d := c.GetData()
		if len(d) > 0 && !within(b, d) {
			t.Errorf("tensor %q: its data is a copy, not a slice of the input", c.GetName())
		}
		if cap(d) != len(d) {
			t.Errorf("tensor %q: its data has room to grow into the input (cap %d, len %d)", c.GetName(), cap(d), len(d))
		}
	}
}

// within reports whether d lies inside b's memory.
func within(b, d []byte) bool {
	lo, p := uintptr(unsafe.Pointer(unsafe.SliceData(b))), uintptr(unsafe.Pointer(unsafe.SliceData(d)))
	return p >= lo && p+uintptr(len(d)) <= lo+uintptr(len(b))
}

// FuzzParseWeights checks that ParseWeights reads any input as
// proto.Unmarshal does.
func FuzzParseWeights(f *testing.F) {
	for _, w := range wireCases() {
		b, err := proto.Marshal(w)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Fuzz(checkParse)
}

func BenchmarkParseWeights(b *testing.B) {
	data := make([]float32, 1<<18) // a 1 MiB chunk
	w := ChunkWeights(NewMeta("run", 1, "weights/1", 1), 1, []Tensor{{Name: "w", Shape: []int64{1 << 18}, Data: data}}, 1<<20)[0]
	enc, err := proto.Marshal(w)
	if err != nil {
		b.Fatal(err)
	}
	b.SetBytes(int64(len(enc)))
	b.Run("ParseWeights", func(b *testing.B) {
		for range b.N {
			if _, err := ParseWeights(enc); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("proto.Unmarshal", func(b *testing.B) {
		for range b.N {
			if err := proto.Unmarshal(enc, &PolicyWeights{}); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// TestWireKnowsEveryField: WeightsPieces and ParseWeights encode and
// read the fields step.proto declares, no more and no fewer; a field
// added there fails here until they handle it.
func TestWireKnowsEveryField(t *testing.T) {
	for _, tc := range []struct {
		msg   proto.Message
		known map[protowire.Number]string
	}{
		{&PolicyWeights{}, map[protowire.Number]string{weightsMeta: "meta", weightsVersion: "version",
			weightsChunkIndex: "chunk_index", weightsChunkCount: "chunk_count", weightsTensors: "tensors"}},
		{&TensorChunk{}, map[protowire.Number]string{chunkName: "name", chunkShape: "shape", chunkOffset: "offset",
			chunkData: "data", chunkTotalBytes: "total_bytes", chunkDType: "dtype"}},
	} {
		fields := tc.msg.ProtoReflect().Descriptor().Fields()
		if fields.Len() != len(tc.known) {
			t.Errorf("%T has %d fields, the wire code knows %d", tc.msg, fields.Len(), len(tc.known))
		}
		for i := range fields.Len() {
			f := fields.Get(i)
			if name := tc.known[f.Number()]; name != string(f.Name()) {
				t.Errorf("%T field %d is %s, the wire code takes it for %q", tc.msg, f.Number(), f.Name(), name)
			}
		}
	}
}
