package safetensors

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"os"
	"slices"
	"sort"
)

// ErrInvalid is wrapped by every *FormatError.
var ErrInvalid = errors.New("safetensors: invalid file")

// ErrNoTensor is returned (wrapped) for a tensor name the file lacks.
var ErrNoTensor = errors.New("safetensors: no such tensor")

// MetadataKey is the reserved header key holding string metadata.
const MetadataKey = "__metadata__"

// maxHeaderLen bounds the JSON header (the Rust library uses 100 MB).
const maxHeaderLen = 100 << 20

// FormatError describes why a file is not valid safetensors.
type FormatError struct {
	File   string // path or name given to Read/Parse
	Tensor string // offending tensor, "" for file-level problems
	Reason string
}

// Error reads `safetensors FILE: tensor "NAME": REASON`.
func (e *FormatError) Error() string {
	if e.Tensor == "" {
		return fmt.Sprintf("safetensors %s: %s", e.File, e.Reason)
	}
	return fmt.Sprintf("safetensors %s: tensor %q: %s", e.File, e.Tensor, e.Reason)
}

// Unwrap returns ErrInvalid.
func (e *FormatError) Unwrap() error { return ErrInvalid }

// Info describes one tensor of a file.
type Info struct {
	Name  string
	DType string
	Shape []int
	// Begin and End are the data_offsets, relative to the data section.
	Begin, End int64
}

// headerEntry is one tensor's JSON header object.
type headerEntry struct {
	DType       string  `json:"dtype"`
	Shape       []int64 `json:"shape"`
	DataOffsets []int64 `json:"data_offsets"`
}

// File is a parsed, validated safetensors file held in memory. It is
// immutable and safe for concurrent use.
type File struct {
	name     string
	infos    map[string]Info
	names    []string // sorted
	metadata map[string]string
	data     []byte // the data section
}

// Read reads and validates the safetensors file at path.
func Read(path string) (*File, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("safetensors: %w", err)
	}
	return Parse(path, b)
}

// Parse validates b as a safetensors file; name is used in errors only.
// The returned File shares memory with b, which must not be modified.
func Parse(name string, b []byte) (*File, error) {
	bad := func(tensor, format string, args ...any) error {
		return &FormatError{File: name, Tensor: tensor, Reason: fmt.Sprintf(format, args...)}
	}
	if len(b) < 8 {
		return nil, bad("", "file is %d bytes, shorter than the 8-byte header length", len(b))
	}
	n := binary.LittleEndian.Uint64(b)
	if n > uint64(len(b)-8) {
		return nil, bad("", "header length %d exceeds the %d bytes after it", n, len(b)-8)
	}
	if n > maxHeaderLen {
		return nil, bad("", "header length %d exceeds the %d-byte limit", n, maxHeaderLen)
	}
	header, data := b[8:8+n], b[8+n:]
	var raw map[string]json.RawMessage
	if err := json.Unmarshal(header, &raw); err != nil {
		return nil, bad("", "header is not a JSON object: %v", err)
	}
	if raw == nil {
		return nil, bad("", "header is JSON null, not an object")
	}
	f := &File{name: name, infos: make(map[string]Info, len(raw)), data: data}
	for key, val := range raw {
		if key == MetadataKey {
			if err := json.Unmarshal(val, &f.metadata); err != nil {
				return nil, bad("", "%s is not an object of strings: %v", MetadataKey, err)
			}
			continue
		}
		if key == "" {
			return nil, bad("", "a tensor has an empty name")
		}
		info, err := parseEntry(key, val)
		if err != nil {
			return nil, bad(key, "%v", err)
		}
		f.infos[key] = info
		f.names = append(f.names, key)
	}
	sort.Strings(f.names)
	if err := f.checkLayout(); err != nil {
		return nil, err
	}
	return f, nil
}

// parseEntry decodes and checks one tensor's header object on its own.
func parseEntry(name string, val json.RawMessage) (Info, error) {
	var e headerEntry
	if err := json.Unmarshal(val, &e); err != nil {
		return Info{}, fmt.Errorf("header entry is not {dtype, shape, data_offsets}: %v", err)
	}
	size := dtypeSizes[e.DType]
	if size == 0 {
		return Info{}, fmt.Errorf("unknown dtype %q", e.DType)
	}
	if len(e.DataOffsets) != 2 {
		return Info{}, fmt.Errorf("data_offsets %v: want [begin, end]", e.DataOffsets)
	}
	begin, end := e.DataOffsets[0], e.DataOffsets[1]
	if begin < 0 || end < begin {
		return Info{}, fmt.Errorf("data_offsets %v: want 0 <= begin <= end", e.DataOffsets)
	}
	shape := make([]int, len(e.Shape))
	bytesWant := int64(size)
	for i, d := range e.Shape {
		if d < 0 {
			return Info{}, fmt.Errorf("shape %v has a negative dimension", e.Shape)
		}
		if d > 0 && bytesWant > math.MaxInt32*int64(1<<20)/d { // 2^51 bytes: far beyond any file
			return Info{}, fmt.Errorf("shape %v is too large", e.Shape)
		}
		bytesWant *= d
		shape[i] = int(d)
	}
	if end-begin != bytesWant {
		return Info{}, fmt.Errorf("data_offsets [%d %d] do not match shape %v x %s (%d bytes)",
			begin, end, shape, e.DType, bytesWant)
	}
	return Info{Name: name, DType: e.DType, Shape: shape, Begin: begin, End: end}, nil
}

// checkLayout requires the tensors, ordered by offset, to tile the data
// section exactly, as the reference implementation does.
func (f *File) checkLayout() error {
	order := slices.Clone(f.names)
	sort.SliceStable(order, func(i, j int) bool {
		a, b := f.infos[order[i]], f.infos[order[j]]
		if a.Begin != b.Begin {
			return a.Begin < b.Begin
		}
		return a.End < b.End
	})
	var pos int64
	for _, name := range order {
		info := f.infos[name]
		switch {
		case info.End > int64(len(f.data)):
			return &FormatError{File: f.name, Tensor: name, Reason: fmt.Sprintf(
				"data_offsets [%d %d] run past the end of the %d-byte data section (truncated file?)",
				info.Begin, info.End, len(f.data))}
		case info.Begin < pos:
			return &FormatError{File: f.name, Tensor: name, Reason: fmt.Sprintf(
				"data_offsets [%d %d] overlap the previous tensor, which ends at %d", info.Begin, info.End, pos)}
		case info.Begin > pos:
			return &FormatError{File: f.name, Tensor: name, Reason: fmt.Sprintf(
				"data_offsets [%d %d] leave a gap after byte %d", info.Begin, info.End, pos)}
		}
		pos = info.End
	}
	if pos != int64(len(f.data)) {
		return &FormatError{File: f.name, Reason: fmt.Sprintf(
			"data section is %d bytes but the tensors cover %d", len(f.data), pos)}
	}
	return nil
}

// Tensors returns the tensor names, sorted.
func (f *File) Tensors() []string { return slices.Clone(f.names) }

// Metadata returns a copy of the __metadata__ map (empty if absent).
func (f *File) Metadata() map[string]string {
	out := make(map[string]string, len(f.metadata))
	for k, v := range f.metadata {
		out[k] = v
	}
	return out
}

// Info returns the header of one tensor.
func (f *File) Info(name string) (Info, bool) {
	info, ok := f.infos[name]
	info.Shape = slices.Clone(info.Shape)
	return info, ok
}

// Float32 returns a copy of the tensor's values as float32 (F32 as is,
// BF16/F16 widened, F64 rounded) and its shape.
func (f *File) Float32(name string) ([]float32, []int, error) {
	info, raw, err := f.floatData(name)
	if err != nil {
		return nil, nil, err
	}
	return decodeF32(info.DType, raw, numel(info.Shape)), info.Shape, nil
}

// Float64 returns a copy of the tensor's values as float64 and its shape.
func (f *File) Float64(name string) ([]float64, []int, error) {
	info, raw, err := f.floatData(name)
	if err != nil {
		return nil, nil, err
	}
	return decodeF64(info.DType, raw, numel(info.Shape)), info.Shape, nil
}

// floatData finds a tensor and checks it has a float dtype.
func (f *File) floatData(name string) (Info, []byte, error) {
	info, ok := f.Info(name)
	if !ok {
		return Info{}, nil, fmt.Errorf("safetensors %s: tensor %q: %w", f.name, name, ErrNoTensor)
	}
	switch info.DType {
	case F32, F64, BF16, F16:
	default:
		return Info{}, nil, fmt.Errorf("safetensors %s: tensor %q: dtype %s is not a float type", f.name, name, info.DType)
	}
	return info, f.data[info.Begin:info.End], nil
}

// numel is the product of shape (1 for a scalar).
func numel(shape []int) int {
	n := 1
	for _, d := range shape {
		n *= d
	}
	return n
}
