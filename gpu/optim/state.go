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

// State is an AdamW's step count and moments: what SaveState writes and
// LoadState reads, and what an optimiser kept elsewhere (on a GPU) hands
// over to be saved. Moments is nil before the first step, and otherwise
// holds one entry per parameter, in the parameters' order.
type State struct {
	Step    int
	Moments []Moments
}

// Moments are the Adam moments of one parameter.
type Moments struct {
	Name             string
	ExpAvg, ExpAvgSq []float32 // exp_avg, exp_avg_sq: one value per element
}

// Shape is a parameter's name and element count: what ReadState checks a
// saved state against.
type Shape struct {
	Name string
	Size int
}

// Shapes returns the names and sizes of params.
func Shapes(params []Param) []Shape {
	s := make([]Shape, len(params))
	for i, p := range params {
		s[i] = Shape{Name: p.Name, Size: len(p.W)}
	}
	return s
}

// State returns the step count and moments. The moments alias the
// optimiser's: they are valid until its next Step or state change.
func (o *AdamW) State() State {
	st := State{Step: o.step}
	for _, m := range o.state {
		st.Moments = append(st.Moments, Moments{Name: m.name, ExpAvg: m.m, ExpAvgSq: m.v})
	}
	return st
}

// SetState replaces the step count and moments by st's, which must name
// exactly params, in their order, with their sizes (as ReadState returns
// them); a moment that is not finite, or a negative exp_avg_sq, is refused
// as CheckState does. The optimiser keeps st's slices. On error it is
// unchanged.
func (o *AdamW) SetState(st State, params []Param) error {
	if st.Step < 0 {
		return fmt.Errorf("%w: step %d", ErrState, st.Step)
	}
	if st.Moments == nil {
		o.step, o.state = st.Step, nil
		return nil
	}
	if len(st.Moments) != len(params) {
		return fmt.Errorf("%w: %d moments for %d parameters", ErrState, len(st.Moments), len(params))
	}
	for i, p := range params {
		m := st.Moments[i]
		if m.Name != p.Name || len(m.ExpAvg) != len(p.W) || len(m.ExpAvgSq) != len(p.W) {
			return fmt.Errorf("%w: moments %d are %q (%d, %d values), parameter %q has %d", ErrState, i, m.Name, len(m.ExpAvg), len(m.ExpAvgSq), p.Name, len(p.W))
		}
	}
	state := stateOf(st)
	if err := (&AdamW{step: st.Step, state: state}).CheckState(); err != nil {
		return err
	}
	o.step, o.state = st.Step, state
	return nil
}

// SaveState writes the step count, the hyper-parameters (metadata) and the
// moments (tensors "<name>.exp_avg" and "<name>.exp_avg_sq", F32, 1-D) to
// path atomically.
func (o *AdamW) SaveState(path string) error { return o.WriteState(path, o.State()) }

// WriteState writes st as SaveState writes an optimiser's own state, with
// o's hyper-parameters in the metadata.
func (o *AdamW) WriteState(path string, st State) error {
	tensors := make([]safetensors.Tensor, 0, 2*len(st.Moments))
	for _, m := range st.Moments {
		tensors = append(tensors,
			safetensors.Tensor{Name: m.Name + suffixExpAvg, Shape: []int{len(m.ExpAvg)}, F32: m.ExpAvg},
			safetensors.Tensor{Name: m.Name + suffixExpAvgSq, Shape: []int{len(m.ExpAvgSq)}, F32: m.ExpAvgSq})
	}
	f := func(x float64) string { return strconv.FormatFloat(x, 'g', -1, 64) }
	meta := map[string]string{
		"format": stateFormat, "step": strconv.Itoa(st.Step),
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
	st, err := ReadState(path, Shapes(params))
	if err != nil {
		return err
	}
	o.step, o.state = st.Step, stateOf(st)
	return nil
}

// ReadState reads a state written by SaveState or WriteState for exactly
// the parameters of shapes (same names and sizes; the file's order may
// differ) and returns it with its moments in shapes' order, range-checked
// as CheckState does: a NaN, an infinity or a negative exp_avg_sq is
// refused, naming the tensor. Every error wraps ErrState or the file's.
func ReadState(path string, shapes []Shape) (State, error) {
	f, err := safetensors.Read(path)
	if err != nil {
		return State{}, fmt.Errorf("load optimizer state: %w", err)
	}
	meta := f.Metadata()
	if meta["format"] != stateFormat {
		return State{}, fmt.Errorf("load optimizer state %s: metadata format = %q, want %q: %w", path, meta["format"], stateFormat, ErrState)
	}
	step, err := strconv.Atoi(meta["step"])
	if err != nil || step < 0 {
		return State{}, fmt.Errorf("load optimizer state %s: metadata step = %q: %w", path, meta["step"], ErrState)
	}
	if step == 0 && len(f.Tensors()) == 0 { // saved before the first Step
		return State{}, nil
	}
	st := State{Step: step, Moments: make([]Moments, len(shapes))}
	want := make(map[string]bool, 2*len(shapes))
	for i, p := range shapes {
		m := Moments{Name: p.Name}
		for _, t := range []struct {
			suffix string
			dst    *[]float32
		}{{suffixExpAvg, &m.ExpAvg}, {suffixExpAvgSq, &m.ExpAvgSq}} {
			name := p.Name + t.suffix
			vals, shape, err := f.Float32(name)
			if err != nil {
				return State{}, fmt.Errorf("load optimizer state %s: tensor %q: %w (%w)", path, name, ErrState, err)
			}
			if len(shape) != 1 || len(vals) != p.Size {
				return State{}, fmt.Errorf("load optimizer state %s: tensor %q: shape %v, want [%d]: %w", path, name, shape, p.Size, ErrState)
			}
			*t.dst = vals
			want[name] = true
		}
		st.Moments[i] = m
	}
	for _, name := range f.Tensors() {
		if !want[name] {
			return State{}, fmt.Errorf("load optimizer state %s: tensor %q belongs to no parameter: %w", path, name, ErrState)
		}
	}
	if err := (&AdamW{step: st.Step, state: stateOf(st)}).CheckState(); err != nil {
		return State{}, fmt.Errorf("load optimizer state %s: %w", path, err)
	}
	return st, nil
}

// stateOf returns st's moments as an AdamW keeps them (aliasing them).
func stateOf(st State) []moments {
	if st.Moments == nil {
		return nil
	}
	state := make([]moments, len(st.Moments))
	for i, m := range st.Moments {
		state[i] = moments{name: m.Name, m: m.ExpAvg, v: m.ExpAvgSq}
	}
	return state
}
