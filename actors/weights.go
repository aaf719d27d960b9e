package actors

import (
	"fmt"

	"github.com/mgrpo/mgrpo/gpu"
	"github.com/mgrpo/mgrpo/messages"
)

// policySnapshot hands a generator new weights inside one process: an
// immutable *gpu.Model, so nothing is serialised (DESIGN §2). Across a
// network the same weights travel as PolicyWeights chunks (chunkModel).
type policySnapshot struct {
	model *gpu.Model
}

// chunkModel splits m's weights into PolicyWeights chunks of at most
// maxBytes of tensor data each, tagged with m's version.
func chunkModel(meta *messages.StepMeta, m *gpu.Model, maxBytes int) ([]*messages.PolicyWeights, error) {
	names := m.TensorNames()
	tensors := make([]messages.Tensor, len(names))
	for i, name := range names {
		data, shape, err := m.Tensor(name)
		if err != nil {
			return nil, fmt.Errorf("chunk weights: %w", err)
		}
		s := make([]int64, len(shape))
		for j, d := range shape {
			s[j] = int64(d)
		}
		tensors[i] = messages.Tensor{Name: name, Shape: s, Data: data}
	}
	return messages.ChunkWeights(meta, m.Version(), tensors, maxBytes), nil
}

// addWeightChunk adds one chunk to a; once every chunk of the version has
// arrived it returns the model they make (weights in the sender's tensor
// order, which is gpu's layout order), else nil.
func addWeightChunk(a *messages.Assembler, cfg gpu.Config, w *messages.PolicyWeights) (*gpu.Model, error) {
	done, err := a.Add(w)
	if err != nil || !done {
		return nil, err
	}
	tensors, err := a.Tensors()
	if err != nil {
		return nil, err
	}
	flat := make([]float32, 0, cfg.NumParams())
	for _, t := range tensors {
		flat = append(flat, t.Data...)
	}
	m, err := gpu.NewModelFromWeights(cfg, flat, a.Version())
	if err != nil {
		return nil, fmt.Errorf("assemble weights version %d: %w", a.Version(), err)
	}
	return m, nil
}
