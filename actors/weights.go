package actors

import (
	"errors"
	"fmt"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/mgrpo/mgrpo/actors/meter"
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
// arrived it returns the model they make on dev (weights in the sender's
// tensor order, which is gpu's layout order), else nil.
func addWeightChunk(a *messages.Assembler, cfg gpu.Config, dev gpu.Device, w *messages.PolicyWeights) (*gpu.Model, error) {
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
	m, err := gpu.NewModelOn(dev, cfg, flat, a.Version()) // flat is the model's, or uploaded and dropped
	if err != nil {
		return nil, fmt.Errorf("assemble weights version %d: %w", a.Version(), err)
	}
	return m, nil
}

// errNoWeights: a stage actor of a worker node was asked for work before
// any weights reached it (the coordinator sends them first, so this is a
// protocol fault).
var errNoWeights = errors.New("actors: no weights received yet")

// weightReceiver assembles the PolicyWeights chunks one stage actor is
// sent into models of cfg on device, where the stage runs its models
// (model.device: a GPU node's weights go to its GPU once assembled).
type weightReceiver struct {
	cfg    gpu.Config
	device gpu.Device
	asm    *messages.Assembler
	meter  *meter.Instruments // counts the bytes received (nil: off)
}

// receive adds chunk m and returns the model once its version is
// complete (nil before). A chunk sent as a request (the coordinator sends
// each version's last chunk so) is answered with WeightsApplied once the
// version is complete, or with a SkipNotice naming a rejected chunk.
func (w *weightReceiver) receive(c actor.Context, id string, m *messages.PolicyWeights) *gpu.Model {
	if w.asm == nil {
		w.asm = &messages.Assembler{MaxBytes: w.cfg.WeightBytes()} // no more than the model holds
	}
	w.meter.WeightsReceived(chunkBytes([]*messages.PolicyWeights{m}))
	model, err := addWeightChunk(w.asm, w.cfg, w.device, m)
	switch {
	case err != nil:
		c.Logger().Warn("weight chunk rejected", "actor", id, "err", err)
		if c.Sender() != nil {
			c.Respond(notice(m.GetMeta(), id, skip(messages.Stage_SYNC, err)))
		}
	case model != nil && c.Sender() != nil:
		c.Respond(&messages.WeightsApplied{Meta: messages.DeriveMeta(m.GetMeta()), Version: m.GetVersion(), Actor: id})
	}
	return model
}
