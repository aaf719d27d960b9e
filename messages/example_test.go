package messages_test

import (
	"fmt"

	"github.com/mgrpo/mgrpo/messages"
)

func ExampleChunkWeights() {
	meta := messages.NewMeta("run-1", 10, "b-10-0", 10)
	tensors := []messages.Tensor{
		{Name: "model.norm.weight", Shape: []int64{4}, Data: []float32{1, 1, 1, 1}},
		{Name: "lm_head.weight", Shape: []int64{2, 4}, Data: []float32{1, 2, 3, 4, 5, 6, 7, 8}},
	}
	chunks := messages.ChunkWeights(meta, 11, tensors, 16) // 16 bytes = 4 floats per chunk
	var a messages.Assembler
	for _, c := range chunks {
		if _, err := a.Add(c); err != nil {
			fmt.Println(err)
		}
	}
	got, _ := a.Tensors()
	fmt.Println(len(chunks), "chunks;", got[1].Name, got[1].Data)
	// Output:
	// 3 chunks; lm_head.weight [1 2 3 4 5 6 7 8]
}
