package actors

import (
	"slices"
	"testing"

	"github.com/mgrpo/mgrpo/gpu"
	"github.com/mgrpo/mgrpo/messages"
)

// TestTensorLayout cuts models of two configurations, one after the
// other and back, with one layout: each is read again when the
// configuration changes, and every snapshot assembles to its own weights.
func TestTensorLayout(t *testing.T) {
	var l tensorLayout
	for i, name := range []string{"tiny", "small", "tiny"} {
		cfg, err := gpu.Preset(name)
		if err != nil {
			t.Fatal(err)
		}
		m, err := gpu.NewModel(cfg, uint64(i+1))
		if err != nil {
			t.Fatal(err)
		}
		chunks, err := chunkModel(messages.NewMeta("r", 1, "w", 1), m, 1<<12, &l)
		if err != nil {
			t.Fatal(err)
		}
		if l.cfg != cfg || len(l.shapes) != len(m.TensorNames()) {
			t.Fatalf("%s: layout of %d tensors for another configuration", name, len(l.shapes))
		}
		a := messages.Assembler{MaxBytes: cfg.WeightBytes()}
		var got *gpu.Model
		for _, c := range chunks {
			if got, err = addWeightChunk(&a, cfg, nil, c); err != nil {
				t.Fatal(err)
			}
		}
		if got == nil || !slices.Equal(got.Weights(), m.Weights()) {
			t.Fatalf("%s: assembled weights differ from the model's", name)
		}
	}
}
