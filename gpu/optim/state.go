package optim

import (
	"errors"
	"fmt"
	"strconv"

	"github.com/mgrpo/mgrpo/gpu/safetensors"
)

// StateFileName is the optimiser file inside a checkpoint directory.
const StateFileName = "optimizer.safetensors"

// ErrState is wrapped by every LoadState mismatch.
var ErrState = errors.New("optim: state does not match the parameters")

// Tensor name suffixes of the saved moments.
const (
	suffixExpAvg   = ".exp_avg"
	suffixExpAvgSq = ".exp_avg_sq"
)

// stateFormat tags the metadata of saved AdamW state.
const stateFormat = "mgrpo-adamw"

// SaveState writes the step count, the hyper-parameters (metadata) and the
// moments (tensors "<name>.exp_avg" and "<name>.exp_avg_sq", F32, 1-D) to
// path atomically.
func (o *AdamW) SaveState(path string) error {
	tensors := make([]safetensors.Tensor, 0, 2*len(o.state))
	for _, st := range o.state {
		tensors = append(tensors,
			safetensors.Tensor{Name: st.name + suffixExpAvg, Shape: []int{len(st.m)}, F32: st.m},
			safetensors.Tensor{Name: st.name + suffixExpAvgSq, Shape: []int{len(st.v)}, F32: st.v})
	}
	f := func(x float64) string { return strconv.FormatFloat(x, 'g', -1, 64) }
	meta := map[string]string{
		"format": stateFormat, "step": strconv.Itoa(o.step),
		"lr": f(o.LR), "beta1": f(o.Beta1), "beta2": f(o.Beta2), "eps": f(o.Eps), "weight_decay": f(o.WeightDecay),
	}
	if err := safetensors.Write(path, tensors, meta); err != nil {
		return fmt.Errorf("save optimizer state: %w", err)
	}
	return nil
}

// LoadState restores the step count and moments saved by SaveState for
// exactly these params (same names and sizes; order may differ). The
// receiver's hyper-parameters are kept: the configuration in force wins
// over the file's metadata. Moments are range-checked as CheckState does:
// a NaN, an infinity or a negative exp_avg_sq is refused, naming the
// tensor. On error the receiver is unchanged.
func (o *AdamW) LoadState(path string, params []Param) error {
	f, err := safetensors.Read(path)
	if err != nil {
		return fmt.Errorf("load optimizer state: %w", err)
	}
	meta := f.Metadata()
	if meta["format"] != stateFormat {
		return fmt.Errorf("load optimizer state %s: metadata format = %q, want %q: %w", path, meta["format"], stateFormat, ErrState)
	}
	step, err := strconv.Atoi(meta["step"])
	if err != nil || step < 0 {
		return fmt.Errorf("load optimizer state %s: metadata step = %q: %w", path, meta["step"], ErrState)
	}
	if step == 0 && len(f.Tensors()) == 0 { // saved before the first Step
		o.step, o.state = 0, nil
		return nil
	}
	state := make([]moments, len(params))
	want := make(map[string]bool, 2*len(params))
	for i, p := range params {
		st := moments{name: p.Name}
		for _, t := range []struct {
			suffix string
			dst    *[]float32
		}{{suffixExpAvg, &st.m}, {suffixExpAvgSq, &st.v}} {
			name := p.Name + t.suffix
			vals, shape, err := f.Float32(name)
			if err != nil {
				return fmt.Errorf("load optimizer state %s: tensor %q: %w (%w)", path, name, ErrState, err)
			}
			if len(shape) != 1 || len(vals) != len(p.W) {
				return fmt.Errorf("load optimizer state %s: tensor %q: shape %v, want [%d]: %w", path, name, shape, len(p.W), ErrState)
			}
			*t.dst = vals
			want[name] = true
		}
		state[i] = st
	}
	for _, name := range f.Tensors() {
		if !want[name] {
			return fmt.Errorf("load optimizer state %s: tensor %q belongs to no parameter: %w", path, name, ErrState)
		}
	}
	loaded := AdamW{step: step, state: state}
	if err := loaded.CheckState(); err != nil {
		return fmt.Errorf("load optimizer state %s: %w", path, err)
	}
	o.step, o.state = step, state
	return nil
}
