package safetensors_test

import (
	"fmt"

	"github.com/mgrpo/mgrpo/gpu/safetensors"
)

func ExampleMarshal() {
	b, err := safetensors.Marshal([]safetensors.Tensor{
		{Name: "model.norm.weight", Shape: []int{2}, F32: []float32{1, 0.5}},
	}, map[string]string{"format": "pt"})
	if err != nil {
		panic(err)
	}
	f, err := safetensors.Parse("in-memory", b)
	if err != nil {
		panic(err)
	}
	w, shape, _ := f.Float32("model.norm.weight")
	fmt.Println(f.Tensors(), w, shape, f.Metadata()["format"], len(b))
	// 120 bytes = 8 (length) + 104 (101-byte header padded to a multiple of 8) + 8 (data).
	// Output: [model.norm.weight] [1 0.5] [2] pt 120
}
