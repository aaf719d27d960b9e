package gpu

import "github.com/mgrpo/mgrpo/gpu/optim"

// The engines: where a model's weights live and its passes run (DESIGN §4,
// docs/ENGINE.md). A Device makes them; a Learner drives an Engine, a
// Model wraps a ModelEngine. Everything else in this package (the loss
// plumbing, the schedule, checkpoints, input checks, the Batch layout) is
// host code shared by every engine.
//
// What crosses the seam per pass is small and on the host: token ids (the
// Batch's sequences, laid out by planRows), the temperature, per-token
// arrays in the Batch layout ([B·Width] float64: completion token t of
// sequence i at i·Width + t, zeros past each completion), the learning
// rate, and scalars back. Weights cross only on request, as one flat fp32
// buffer in TensorNames order.
//
// Engines check nothing their callers check: sequences, temperatures,
// sampling options and the lengths of per-token arrays arrive valid
// (Model and Learner validate them). A method that reports an error
// leaves the weights, gradients and optimiser state as they were, unless
// its doc says otherwise; a device error that a method without an error
// result meets is reported by the next method that has one.

// Engine is a trainable model on one device: its weights in the engine's
// own layout, their gradients, the AdamW moments and step count, and the
// activations of the last Forward. The Learner runs a step as
//
//	Forward → (loss on the host) → ZeroGrad → Backward → ClipGradNorm → Update
//
// and, with micro-batches (LearnerConfig.MicroBatch), as Score on each
// micro-batch, the loss on the whole batch, ZeroGrad, then Forward and
// Backward on each micro-batch, ClipGradNorm and Update once. An Engine is
// not safe for concurrent use.
type Engine interface {
	// Forward runs the model over b's sequences at the temperature,
	// keeping what Backward needs, and writes the log-prob of each
	// completion token and the entropy of the distribution it is drawn
	// from to lp and ent ([B·Width] each, b.Width resolved as Batch does).
	Forward(b Batch, temperature float64, lp, ent []float64) error
	// Score is Forward without keeping anything for Backward: the outputs
	// are the same, and the last Forward can no longer be differentiated.
	Score(b Batch, temperature float64, lp, ent []float64) error
	// Backward adds to the gradients those of a loss whose derivatives
	// with respect to the last Forward's lp and ent are dLogp and dEntropy
	// (its layout; dEntropy nil: the loss has no entropy term).
	Backward(dLogp, dEntropy []float64) error
	// ZeroGrad sets every gradient to zero.
	ZeroGrad()
	// ClipGradNorm returns the global L2 norm of the gradients and, when
	// maxNorm > 0 and the norm is finite and above it, scales them by
	// maxNorm/(norm+1e-6) (torch.nn.utils.clip_grad_norm_). A non-finite
	// norm leaves them as they are.
	ClipGradNorm(maxNorm float64) (float64, error)
	// Update takes one AdamW step at learning rate lr with the hyper-
	// parameters of the LearnerConfig the engine was made with, after a
	// preview with the step's own arithmetic: a step that would leave a
	// weight or moment non-finite, or whose update norm would exceed
	// MaxUpdateRatio times the weights' norm, is refused with an error
	// wrapping ErrBadUpdate, and weights, moments and step count stay as
	// they are.
	Update(lr float64) error
	// Steps is the number of AdamW steps taken (the schedule's clock).
	Steps() int
	// ReadWeights copies weights offset..offset+len(dst)-1 of the flat
	// buffer (TensorNames order) into dst.
	ReadWeights(dst []float32, offset int) error
	// ReadGrads copies gradients offset..offset+len(dst)-1 (the weights'
	// layout) into dst: for tests and diagnostics.
	ReadGrads(dst []float32, offset int) error
	// SetWeights replaces every weight by w (flat, TensorNames order); the
	// optimiser state is kept.
	SetWeights(w []float32) error
	// OptimizerState returns the AdamW step count and moments on the host,
	// valid until the next Update or SetOptimizerState.
	OptimizerState() (optim.State, error)
	// SetOptimizerState replaces them (optim.AdamW.SetState's checks); on
	// error nothing changes.
	SetOptimizerState(st optim.State) error
	// Snapshot returns an immutable ModelEngine over a copy of the current
	// weights, on the same device: the weights need not pass through the
	// host.
	Snapshot() (ModelEngine, error)
}

// ModelEngine is an immutable model on one device: sampling and scoring
// only read its weights, so it is safe for concurrent use.
type ModelEngine interface {
	// Score writes the log-prob of each completion token of b's sequences
	// at the temperature, and the entropy of the distribution it is drawn
	// from, to lp and ent ([B·Width] each).
	Score(b Batch, temperature float64, lp, ent []float64) error
	// Sample draws n completions per prompt with Sample's semantics
	// (SampleOptions checked, Temperature set when Greedy).
	Sample(prompts [][]int, n int, opt SampleOptions) ([]Sample, error)
	// ReadWeights copies weights offset..offset+len(dst)-1 of the flat
	// buffer (TensorNames order) into dst.
	ReadWeights(dst []float32, offset int) error
}

// hostWeighter is a model engine whose weights are a host buffer: it lends
// them (read only) instead of copying them out.
type hostWeighter interface {
	hostWeights() []float32
}

// modelWeights returns m's flat weights for reading: the engine's own
// buffer when it lends one, a copy otherwise.
func modelWeights(m *Model) []float32 {
	if w, ok := m.HostWeights(); ok {
		return w
	}
	return m.Weights()
}
