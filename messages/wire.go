package messages

import (
	"errors"
	"fmt"
	"unicode/utf8"

	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
)

// A weight chunk is a megabyte of tensor data behind a few bytes of
// header. proto.Marshal copies that data into the encoding and
// proto.Unmarshal copies it out again, so a snapshot of hundreds of
// megabytes crossing the weight port would be copied twice more than the
// socket needs. WeightsPieces and ParseWeights make and read the same
// encoding without those copies: the data stays where it is on the way
// out and is read in place on the way in.

// PolicyWeights field numbers (step.proto).
const (
	weightsMeta       protowire.Number = 1
	weightsVersion    protowire.Number = 2
	weightsChunkIndex protowire.Number = 3
	weightsChunkCount protowire.Number = 4
	weightsTensors    protowire.Number = 5
)

// TensorChunk field numbers (step.proto).
const (
	chunkName       protowire.Number = 1
	chunkShape      protowire.Number = 2
	chunkOffset     protowire.Number = 3
	chunkData       protowire.Number = 4
	chunkTotalBytes protowire.Number = 5
	chunkDType      protowire.Number = 6
)

// WeightsPieces returns w's protobuf encoding, byte for byte what
// proto.Marshal makes of it with Deterministic set (a trace map's entries
// sorted), as pieces to be written one after another:
// each tensor's data is a piece of its own that shares w's memory, the
// rest is encoded into a few small pieces. w must not change while the
// pieces are in use.
func WeightsPieces(w *PolicyWeights) ([][]byte, error) {
	var head []byte
	if w.GetMeta() != nil {
		meta, err := proto.MarshalOptions{Deterministic: true}.Marshal(w.GetMeta())
		if err != nil {
			return nil, fmt.Errorf("encode weights version %d: meta: %w", w.GetVersion(), err)
		}
		head = protowire.AppendBytes(protowire.AppendTag(head, weightsMeta, protowire.BytesType), meta)
	}
	head = appendVarintField(head, weightsVersion, uint64(w.GetVersion()))
	head = appendVarintField(head, weightsChunkIndex, uint64(int64(w.GetChunkIndex())))
	head = appendVarintField(head, weightsChunkCount, uint64(int64(w.GetChunkCount())))
	pieces := [][]byte{}
	for _, c := range w.GetTensors() {
		before, after := chunkHeads(c)
		size := len(before) + len(after)
		if len(c.GetData()) > 0 {
			size += protowire.SizeTag(chunkData) + protowire.SizeBytes(len(c.GetData()))
		}
		head = protowire.AppendVarint(protowire.AppendTag(head, weightsTensors, protowire.BytesType), uint64(size))
		head = append(head, before...)
		if len(c.GetData()) > 0 {
			head = protowire.AppendVarint(protowire.AppendTag(head, chunkData, protowire.BytesType), uint64(len(c.GetData())))
			pieces = append(pieces, head, c.GetData())
			head = nil
		}
		head = append(head, after...)
	}
	head = append(head, w.ProtoReflect().GetUnknown()...)
	if len(head) > 0 || len(pieces) == 0 {
		pieces = append(pieces, head)
	}
	return pieces, nil
}

// chunkHeads encodes c's fields before its data and after it (unknown
// fields last, as proto.Marshal puts them).
func chunkHeads(c *TensorChunk) (before, after []byte) {
	if c.GetName() != "" {
		before = protowire.AppendString(protowire.AppendTag(before, chunkName, protowire.BytesType), c.GetName())
	}
	if len(c.GetShape()) > 0 {
		packed := []byte{}
		for _, d := range c.GetShape() {
			packed = protowire.AppendVarint(packed, uint64(d))
		}
		before = protowire.AppendBytes(protowire.AppendTag(before, chunkShape, protowire.BytesType), packed)
	}
	before = appendVarintField(before, chunkOffset, uint64(c.GetOffset()))
	after = appendVarintField(after, chunkTotalBytes, uint64(c.GetTotalBytes()))
	after = appendVarintField(after, chunkDType, uint64(int64(c.GetDtype())))
	return before, append(after, c.ProtoReflect().GetUnknown()...)
}

// appendVarintField appends field num with value v unless v is zero (a
// proto3 scalar's default is not encoded).
func appendVarintField(b []byte, num protowire.Number, v uint64) []byte {
	if v == 0 {
		return b
	}
	return protowire.AppendVarint(protowire.AppendTag(b, num, protowire.VarintType), v)
}

// ParseWeights decodes b, a PolicyWeights' protobuf encoding, as
// proto.Unmarshal does (the same message, or an error where it gives
// one), except that each tensor's data is a slice of b instead of a copy:
// b must not change while the result is in use.
func ParseWeights(b []byte) (*PolicyWeights, error) {
	w := &PolicyWeights{}
	var unknown []byte
	err := eachField(b, func(num protowire.Number, typ protowire.Type, v []byte) error {
		var known bool
		var err error
		switch num {
		case weightsMeta:
			if known = typ == protowire.BytesType; known {
				if w.Meta == nil {
					w.Meta = &StepMeta{}
				}
				err = proto.UnmarshalOptions{Merge: true}.Unmarshal(bytesValue(v), w.Meta)
			}
		case weightsVersion:
			known = varintField(typ, v, func(x uint64) { w.Version = int64(x) })
		case weightsChunkIndex:
			known = varintField(typ, v, func(x uint64) { w.ChunkIndex = int32(x) })
		case weightsChunkCount:
			known = varintField(typ, v, func(x uint64) { w.ChunkCount = int32(x) })
		case weightsTensors:
			if known = typ == protowire.BytesType; known {
				var c *TensorChunk
				if c, err = parseChunk(bytesValue(v)); err == nil {
					w.Tensors = append(w.Tensors, c)
				}
			}
		}
		if !known {
			unknown = append(protowire.AppendTag(unknown, num, typ), v...) // the tag re-encoded, as proto.Unmarshal keeps it
		}
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("parse weights: %w", err)
	}
	if len(unknown) > 0 {
		w.ProtoReflect().SetUnknown(unknown)
	}
	return w, nil
}

// parseChunk decodes one TensorChunk, its data a slice of b.
func parseChunk(b []byte) (*TensorChunk, error) {
	c := &TensorChunk{}
	var unknown []byte
	err := eachField(b, func(num protowire.Number, typ protowire.Type, v []byte) error {
		known := false
		switch num {
		case chunkName:
			if known = typ == protowire.BytesType; known {
				s := bytesValue(v)
				if !utf8.Valid(s) {
					return errors.New("tensor chunk: name: invalid UTF-8")
				}
				c.Name = string(s)
			}
		case chunkShape:
			var err error
			if known, err = appendInt64s(&c.Shape, typ, v); err != nil {
				return err
			}
		case chunkOffset:
			known = varintField(typ, v, func(x uint64) { c.Offset = int64(x) })
		case chunkData:
			if known = typ == protowire.BytesType; known {
				d := bytesValue(v)
				c.Data = d[:len(d):len(d)]
			}
		case chunkTotalBytes:
			known = varintField(typ, v, func(x uint64) { c.TotalBytes = int64(x) })
		case chunkDType:
			known = varintField(typ, v, func(x uint64) { c.Dtype = DType(int32(x)) })
		}
		if !known {
			unknown = append(protowire.AppendTag(unknown, num, typ), v...) // the tag re-encoded, as proto.Unmarshal keeps it
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	if len(unknown) > 0 {
		c.ProtoReflect().SetUnknown(unknown)
	}
	return c, nil
}

// eachField calls f with each field of the encoded message b in order:
// its number, wire type and encoded value (a varint's bytes, a length-
// delimited field's length and bytes, ...).
func eachField(b []byte, f func(num protowire.Number, typ protowire.Type, v []byte) error) error {
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			return protowire.ParseError(n)
		}
		if num > protowire.MaxValidNumber {
			return fmt.Errorf("field number %d out of range", num)
		}
		m := protowire.ConsumeFieldValue(num, typ, b[n:])
		if m < 0 {
			return protowire.ParseError(m)
		}
		if err := f(num, typ, b[n:n+m]); err != nil {
			return err
		}
		b = b[n+m:]
	}
	return nil
}

// bytesValue is the bytes of v, a length-delimited value eachField
// checked.
func bytesValue(v []byte) []byte {
	d, _ := protowire.ConsumeBytes(v)
	return d
}

// varintField hands set the varint v when typ is the varint type and reports
// whether it was (a field of another wire type is unknown, as
// proto.Unmarshal keeps it).
func varintField(typ protowire.Type, v []byte, set func(uint64)) bool {
	if typ != protowire.VarintType {
		return false
	}
	x, _ := protowire.ConsumeVarint(v)
	set(x)
	return true
}

// appendInt64s appends the int64s of v, packed or one varint, to xs and
// reports whether the field's wire type was one of those.
func appendInt64s(xs *[]int64, typ protowire.Type, v []byte) (bool, error) {
	switch typ {
	case protowire.VarintType:
		x, _ := protowire.ConsumeVarint(v)
		*xs = append(*xs, int64(x))
		return true, nil
	case protowire.BytesType:
		p := bytesValue(v)
		for len(p) > 0 {
			x, n := protowire.ConsumeVarint(p)
			if n < 0 {
				return true, protowire.ParseError(n)
			}
			*xs = append(*xs, int64(x))
			p = p[n:]
		}
		return true, nil
	}
	return false, nil
}
