// Package safetensors reads and writes the safetensors tensor file format
// used by Hugging Face checkpoints (model.safetensors) and by mgrpo's
// optimiser state.
//
// # Format
//
// A file is an 8-byte little-endian unsigned header length N, then N bytes
// of JSON header, then the data section:
//
//	{"__metadata__": {"k": "v"},
//	 "name": {"dtype": "F32", "shape": [2, 3], "data_offsets": [begin, end]}, ...}
//
// data_offsets are byte offsets relative to the start of the data section;
// the data is raw little-endian, row-major. Write pads the header with
// spaces to a multiple of 8 bytes, emits __metadata__ first (omitted when
// empty) and the tensors sorted by name, laid out back to back, so its output
// is deterministic and readable by the Python/Rust safetensors library.
//
// Dtypes: F32 and F64 are read and written; BF16 and F16 are read and
// converted to float32. Other standard dtypes (I64, U8, BOOL, ...) are
// accepted in a header and listed, but cannot be converted.
//
// # Invariants
//
// Read validates the whole file before returning: header length within the
// file, header JSON, known dtypes, non-negative shapes, data_offsets equal to
// shape x dtype size, tensors that tile the data section exactly (no overlap,
// no gap, no trailing bytes). Every failure is a *FormatError (wrapping
// ErrInvalid) that names the file and, where there is one, the tensor. No
// input makes it panic (FuzzRead).
//
// It imports only the standard library; it never imports the model, actors
// or messages.
//
// Example:
//
//	err := safetensors.Write("model.safetensors", []safetensors.Tensor{
//		{Name: "model.norm.weight", Shape: []int{64}, F32: w}}, nil)
//	f, err := safetensors.Read("model.safetensors")
//	w, shape, err := f.Float32("model.norm.weight")
package safetensors
