package safetensors

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"slices"
	"strings"

	"github.com/mgrpo/mgrpo/internal/atomicfile"
)

// Tensor is one named tensor to write. Exactly one of F32 and F64 holds
// the row-major values; DType may be left empty and is then inferred.
type Tensor struct {
	Name  string
	Shape []int
	DType string // F32 or F64; "" = from whichever slice is set
	F32   []float32
	F64   []float64
}

// Write writes tensors and metadata to path atomically: a temp file in the
// same directory is written, fsynced, closed and renamed over path, and the
// directory is fsynced. Tensors are sorted by name; inputs are not modified.
func Write(path string, tensors []Tensor, metadata map[string]string) error {
	if err := write(path, tensors, metadata); err != nil {
		return fmt.Errorf("write safetensors %s: %w", path, err)
	}
	return nil
}

func write(path string, tensors []Tensor, metadata map[string]string) error {
	sorted, header, err := prepare(tensors, metadata)
	if err != nil {
		return err
	}
	return atomicfile.Write(path, func(w io.Writer) error { return encode(w, sorted, header) })
}

// Marshal returns the bytes Write would put in the file.
func Marshal(tensors []Tensor, metadata map[string]string) ([]byte, error) {
	sorted, header, err := prepare(tensors, metadata)
	if err != nil {
		return nil, fmt.Errorf("marshal safetensors: %w", err)
	}
	var buf bytes.Buffer
	if err := encode(&buf, sorted, header); err != nil {
		return nil, fmt.Errorf("marshal safetensors: %w", err)
	}
	return buf.Bytes(), nil
}

// prepare validates tensors and builds the padded JSON header. It returns
// the tensors sorted by name with DType filled in.
func prepare(tensors []Tensor, metadata map[string]string) ([]Tensor, []byte, error) {
	sorted := slices.Clone(tensors)
	slices.SortFunc(sorted, func(a, b Tensor) int { return strings.Compare(a.Name, b.Name) })
	for i := range sorted {
		t := &sorted[i]
		if err := check(t); err != nil {
			return nil, nil, fmt.Errorf("tensor %q: %w", t.Name, err)
		}
		if i > 0 && sorted[i-1].Name == t.Name {
			return nil, nil, fmt.Errorf("tensor %q: duplicate name", t.Name)
		}
	}
	var h bytes.Buffer
	h.WriteByte('{')
	if len(metadata) > 0 {
		m, err := json.Marshal(metadata) // keys sorted by encoding/json
		if err != nil {
			return nil, nil, err
		}
		h.WriteString(`"` + MetadataKey + `":`)
		h.Write(m)
	}
	var off int64
	for i, t := range sorted {
		if i > 0 || len(metadata) > 0 {
			h.WriteByte(',')
		}
		name, _ := json.Marshal(t.Name)
		shape, _ := json.Marshal(append([]int{}, t.Shape...)) // [] not null for scalars
		size := int64(numel(t.Shape) * dtypeSizes[t.DType])
		fmt.Fprintf(&h, `%s:{"dtype":"%s","shape":%s,"data_offsets":[%d,%d]}`, name, t.DType, shape, off, off+size)
		off += size
	}
	h.WriteByte('}')
	for h.Len()%8 != 0 {
		h.WriteByte(' ')
	}
	return sorted, h.Bytes(), nil
}

// check validates one tensor and fills in its DType.
func check(t *Tensor) error {
	if t.Name == "" || t.Name == MetadataKey {
		return fmt.Errorf("reserved or empty name")
	}
	if t.DType == "" {
		switch {
		case t.F32 != nil && t.F64 == nil:
			t.DType = F32
		case t.F64 != nil && t.F32 == nil:
			t.DType = F64
		default:
			return fmt.Errorf("set exactly one of F32 and F64")
		}
	}
	n := 1
	for _, d := range t.Shape {
		if d < 0 {
			return fmt.Errorf("shape %v has a negative dimension", t.Shape)
		}
		n *= d
	}
	var have int
	switch t.DType {
	case F32:
		have = len(t.F32)
	case F64:
		have = len(t.F64)
	default:
		return fmt.Errorf("dtype %q cannot be written (F32 or F64)", t.DType)
	}
	if have != n {
		return fmt.Errorf("%d values for shape %v (%d elements)", have, t.Shape, n)
	}
	return nil
}

// encode writes the length prefix, the header and the data.
func encode(w io.Writer, sorted []Tensor, header []byte) error {
	var n [8]byte
	binary.LittleEndian.PutUint64(n[:], uint64(len(header)))
	if _, err := w.Write(n[:]); err != nil {
		return err
	}
	if _, err := w.Write(header); err != nil {
		return err
	}
	const chunk = 8192 // values per buffered write
	buf := make([]byte, 0, 8*chunk)
	le := binary.LittleEndian
	for _, t := range sorted {
		n := len(t.F64)
		if t.DType == F32 {
			n = len(t.F32)
		}
		for start := 0; start < n; start += chunk {
			buf = buf[:0]
			if t.DType == F32 {
				for _, v := range t.F32[start:min(start+chunk, n)] {
					buf = le.AppendUint32(buf, math.Float32bits(v))
				}
			} else {
				for _, v := range t.F64[start:min(start+chunk, n)] {
					buf = le.AppendUint64(buf, math.Float64bits(v))
				}
			}
			if _, err := w.Write(buf); err != nil {
				return err
			}
		}
	}
	return nil
}
