package safetensors

import (
	"encoding/binary"
	"errors"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"testing"
)

// raw assembles a file from a header string and data, without padding.
func raw(header string, data []byte) []byte {
	b := binary.LittleEndian.AppendUint64(nil, uint64(len(header)))
	return append(append(b, header...), data...)
}

func TestRoundTrip(t *testing.T) {
	path := filepath.Join(t.TempDir(), "model.safetensors")
	in := []Tensor{
		{Name: "z.weight", Shape: []int{2, 3}, F32: []float32{1, -2, 3.5, float32(math.Inf(1)), 0, -0.125}},
		{Name: "a.bias", Shape: []int{3}, F64: []float64{math.Pi, -1e-300, 7}},
		{Name: "scalar", Shape: []int{}, F32: []float32{42}},
		{Name: "empty", Shape: []int{0, 4}, DType: F32, F32: []float32{}},
	}
	meta := map[string]string{"format": "pt", "step": "12"}
	if err := Write(path, in, meta); err != nil {
		t.Fatal(err)
	}
	f, err := Read(path)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := f.Tensors(), []string{"a.bias", "empty", "scalar", "z.weight"}; !reflect.DeepEqual(got, want) {
		t.Errorf("Tensors = %v, want %v", got, want)
	}
	if !reflect.DeepEqual(f.Metadata(), meta) {
		t.Errorf("Metadata = %v, want %v", f.Metadata(), meta)
	}
	for _, tc := range in {
		if tc.F32 != nil {
			got, shape, err := f.Float32(tc.Name)
			if err != nil || !reflect.DeepEqual(got, tc.F32) || !reflect.DeepEqual(shape, tc.Shape) {
				t.Errorf("%s: Float32 = %v %v %v, want %v %v", tc.Name, got, shape, err, tc.F32, tc.Shape)
			}
		} else {
			got, shape, err := f.Float64(tc.Name)
			if err != nil || !reflect.DeepEqual(got, tc.F64) || !reflect.DeepEqual(shape, tc.Shape) {
				t.Errorf("%s: Float64 = %v %v %v, want %v %v", tc.Name, got, shape, err, tc.F64, tc.Shape)
			}
		}
	}
	entries, _ := os.ReadDir(filepath.Dir(path))
	if len(entries) != 1 {
		t.Errorf("dir holds %d entries, want 1 (temp file left behind)", len(entries))
	}
}

// TestWriteExactBytes checks Write against a file assembled by hand from the
// format description (8-byte LE length, JSON header with __metadata__ first,
// space padding to a multiple of 8, LE data), as the Rust/Python library
// writes it.
func TestWriteExactBytes(t *testing.T) {
	header := `{"__metadata__":{"format":"pt"},` +
		`"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},` +
		`"b":{"dtype":"F64","shape":[],"data_offsets":[8,16]}}` + "      " // 138 + 6 = 144
	want := []byte{144, 0, 0, 0, 0, 0, 0, 0}
	want = append(want, header...)
	want = append(want, 0x00, 0x00, 0x80, 0x3f)       // float32 1.0
	want = append(want, 0x00, 0x00, 0x00, 0xc0)       // float32 -2.0
	want = append(want, 0, 0, 0, 0, 0, 0, 0xe0, 0x3f) // float64 0.5
	got, err := Marshal([]Tensor{
		{Name: "b", Shape: []int{}, F64: []float64{0.5}},
		{Name: "a", Shape: []int{2}, F32: []float32{1, -2}},
	}, map[string]string{"format": "pt"})
	if err != nil {
		t.Fatal(err)
	}
	if string(got) != string(want) {
		t.Errorf("Marshal =\n%q\nwant\n%q", got, want)
	}
	if (len(got)-16-8)%8 != 0 {
		t.Errorf("header not padded to a multiple of 8")
	}
}

func TestHalfPrecision(t *testing.T) {
	// bfloat16 = top 16 bits of float32; IEEE half values from the format's
	// definition (1 sign, 5 exponent bias 15, 10 fraction bits).
	cases := []struct {
		dtype string
		bits  uint16
		want  float32
	}{
		{BF16, 0x3F80, 1}, {BF16, 0xC000, -2}, {BF16, 0x3FC0, 1.5}, {BF16, 0x4049, 3.140625},
		{BF16, 0x7F80, float32(math.Inf(1))}, {BF16, 0x0000, 0},
		{F16, 0x3C00, 1}, {F16, 0xC000, -2}, {F16, 0x3555, 0.333251953125},
		{F16, 0x0001, 5.9604644775390625e-08}, {F16, 0x7BFF, 65504}, {F16, 0x7C00, float32(math.Inf(1))},
		{F16, 0xFC00, float32(math.Inf(-1))}, {F16, 0x8000, float32(math.Copysign(0, -1))},
	}
	var data []byte
	header := "{"
	for i, c := range cases {
		if i > 0 {
			header += ","
		}
		header += `"t` + string(rune('a'+i)) + `":{"dtype":"` + c.dtype + `","shape":[1],"data_offsets":[` +
			strconv.Itoa(2*i) + "," + strconv.Itoa(2*i+2) + "]}"
		data = binary.LittleEndian.AppendUint16(data, c.bits)
	}
	f, err := Parse("half", raw(header+"}", data))
	if err != nil {
		t.Fatal(err)
	}
	for i, c := range cases {
		got, _, err := f.Float32("t" + string(rune('a'+i)))
		if err != nil || math.Float32bits(got[0]) != math.Float32bits(c.want) {
			t.Errorf("%s %#04x = %v (%v), want %v", c.dtype, c.bits, got, err, c.want)
		}
	}
	nan := f16ToF32(0x7E00)
	if !math.IsNaN(float64(nan)) {
		t.Errorf("f16 0x7E00 = %v, want NaN", nan)
	}
}

func TestCorruptFiles(t *testing.T) {
	f32x2 := make([]byte, 8)
	cases := []struct {
		name string
		file []byte
		want string
	}{
		{"short", []byte{1, 2, 3}, "safetensors m.st: file is 3 bytes"},
		{"header too long", raw(`{}`, nil)[:9], "header length 2 exceeds the 1 bytes"},
		{"huge header length", append(binary.LittleEndian.AppendUint64(nil, math.MaxUint64), '{', '}'), "header length 18446744073709551615"},
		{"not json", raw(`{"a":`, nil), "header is not a JSON object"},
		{"json array", raw(`[1]`, nil), "header is not a JSON object"},
		{"json null", raw(`null`, nil), "JSON null"},
		{"trailing junk", raw(`{}x`, nil), "header is not a JSON object"},
		{"unknown dtype", raw(`{"w":{"dtype":"F31","shape":[2],"data_offsets":[0,8]}}`, f32x2), `tensor "w": unknown dtype "F31"`},
		{"size mismatch", raw(`{"model.norm.weight":{"dtype":"F32","shape":[64],"data_offsets":[0,100]}}`, make([]byte, 100)),
			`safetensors m.st: tensor "model.norm.weight": data_offsets [0 100] do not match shape [64] x F32 (256 bytes)`},
		{"negative dim", raw(`{"w":{"dtype":"F32","shape":[-2],"data_offsets":[0,8]}}`, f32x2), "negative dimension"},
		{"huge dims", raw(`{"w":{"dtype":"F32","shape":[4611686018427387904,4],"data_offsets":[0,8]}}`, f32x2), "too large"},
		{"offsets length", raw(`{"w":{"dtype":"F32","shape":[2],"data_offsets":[0]}}`, f32x2), "want [begin, end]"},
		{"offsets reversed", raw(`{"w":{"dtype":"F32","shape":[0],"data_offsets":[8,0]}}`, f32x2), "begin <= end"},
		{"bad entry", raw(`{"w":{"dtype":"F32","shape":"x","data_offsets":[0,8]}}`, f32x2), `tensor "w": header entry`},
		{"truncated", raw(`{"w":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}}`, f32x2[:5]), `tensor "w": data_offsets [0 8] run past the end of the 5-byte`},
		{"overlap", raw(`{"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},"b":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}}`, f32x2), `tensor "b": data_offsets [4 8] overlap`},
		{"gap", raw(`{"a":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}}`, f32x2), `tensor "a": data_offsets [4 8] leave a gap after byte 0`},
		{"trailing data", raw(`{"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]}}`, f32x2), "data section is 8 bytes but the tensors cover 4"},
		{"empty name", raw(`{"":{"dtype":"F64","shape":[1],"data_offsets":[0,8]}}`, f32x2), "a tensor has an empty name"},
		{"metadata not strings", raw(`{"__metadata__":{"step":3}}`, nil), "__metadata__ is not an object of strings"},
	}
	for _, c := range cases {
		_, err := Parse("m.st", c.file)
		var fe *FormatError
		if err == nil || !strings.Contains(err.Error(), c.want) || !errors.Is(err, ErrInvalid) || !errors.As(err, &fe) {
			t.Errorf("%s: error = %v, want a FormatError containing %q", c.name, err, c.want)
		}
	}
}

func TestAccessErrors(t *testing.T) {
	f, err := Parse("m.st", raw(`{"ids":{"dtype":"I64","shape":[1],"data_offsets":[0,8]}}`, make([]byte, 8)))
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := f.Float32("missing"); !errors.Is(err, ErrNoTensor) {
		t.Errorf("Float32(missing) error = %v, want ErrNoTensor", err)
	}
	if _, _, err := f.Float32("ids"); err == nil || !strings.Contains(err.Error(), "I64 is not a float type") {
		t.Errorf("Float32(I64) error = %v", err)
	}
	if info, ok := f.Info("ids"); !ok || info.DType != "I64" || info.End != 8 {
		t.Errorf("Info = %+v %v", info, ok)
	}
}

func TestWriteErrors(t *testing.T) {
	cases := []struct {
		name string
		ts   []Tensor
		want string
	}{
		{"count", []Tensor{{Name: "w", Shape: []int{3}, F32: []float32{1, 2}}}, `tensor "w": 2 values for shape [3]`},
		{"both slices", []Tensor{{Name: "w", Shape: []int{1}, F32: []float32{1}, F64: []float64{1}}}, "exactly one"},
		{"dtype", []Tensor{{Name: "w", Shape: []int{1}, DType: BF16, F32: []float32{1}}}, "cannot be written"},
		{"duplicate", []Tensor{{Name: "w", Shape: []int{1}, F32: []float32{1}}, {Name: "w", Shape: []int{1}, F32: []float32{1}}}, "duplicate"},
		{"reserved", []Tensor{{Name: MetadataKey, Shape: []int{1}, F32: []float32{1}}}, "reserved"},
	}
	dir := t.TempDir()
	for _, c := range cases {
		err := Write(filepath.Join(dir, "x.safetensors"), c.ts, nil)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: Write error = %v, want %q", c.name, err, c.want)
		}
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 0 {
		t.Errorf("failed writes left %d files", len(entries))
	}
}

func TestWriteDoesNotModifyInput(t *testing.T) {
	in := []Tensor{{Name: "b", Shape: []int{1}, F32: []float32{1}}, {Name: "a", Shape: []int{1}, F32: []float32{2}}}
	if _, err := Marshal(in, nil); err != nil {
		t.Fatal(err)
	}
	if in[0].Name != "b" || in[0].DType != "" {
		t.Errorf("Marshal modified its input: %+v", in)
	}
}

func FuzzRead(f *testing.F) {
	good, _ := Marshal([]Tensor{
		{Name: "a", Shape: []int{2, 2}, F32: []float32{1, 2, 3, 4}},
		{Name: "b", Shape: []int{1}, F64: []float64{5}},
	}, map[string]string{"k": "v"})
	f.Add(good)
	f.Add(raw(`{"h":{"dtype":"BF16","shape":[2],"data_offsets":[0,4]}}`, []byte{0x80, 0x3f, 0, 0xc0}))
	f.Add(raw(`{"h":{"dtype":"F16","shape":[1],"data_offsets":[0,2]}}`, []byte{0, 0x3c}))
	f.Add(raw(`{"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]},"b":{"dtype":"F32","shape":[1],"data_offsets":[0,4]}}`, make([]byte, 4)))
	f.Add(raw(`{"a":{"dtype":"F32","shape":[0],"data_offsets":[0,0]}}`, nil))
	f.Add([]byte{})
	f.Add(good[:len(good)-3])
	f.Fuzz(func(t *testing.T, b []byte) {
		file, err := Parse("fuzz", b)
		if err != nil {
			if !errors.Is(err, ErrInvalid) {
				t.Fatalf("error %v does not wrap ErrInvalid", err)
			}
			return
		}
		var ts []Tensor
		for _, name := range file.Tensors() {
			info, _ := file.Info(name)
			v, shape, err := file.Float64(name)
			if err != nil {
				continue // non-float dtype
			}
			if numel(shape) != len(v) {
				t.Fatalf("%s: %d values for shape %v", name, len(v), shape)
			}
			if info.DType == F64 {
				ts = append(ts, Tensor{Name: name, Shape: shape, F64: v})
			}
		}
		again, err := Marshal(ts, file.Metadata())
		if err != nil {
			t.Fatalf("re-marshal: %v", err)
		}
		if _, err := Parse("again", again); err != nil {
			t.Fatalf("re-parse: %v", err)
		}
	})
}
