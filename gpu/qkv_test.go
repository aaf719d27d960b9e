package gpu

import (
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
)

// Finite-difference checks of the Qwen layers' kernels (qkv.go), in the
// style of gradcheck_test.go: a loss Σ r·y, its backward with dy = r, and
// every input and weight gradient against central differences.

func TestGradQKNorm(t *testing.T) {
	for _, tc := range []struct {
		s       headShape
		rows    int
		workers int
	}{{headShape{H: 2, G: 1, E: 4}, 5, 1}, {headShape{H: 4, G: 2, E: 6}, 7, 3}, {headShape{H: 3, G: 3, E: 2}, 2, 2}} {
		rng := rand.New(rand.NewPCG(21, uint64(tc.s.E)))
		stride := tc.s.stride()
		in, r := randVec(rng, tc.rows*stride, 1), randVec(rng, tc.rows*stride, 1)
		wq, wk := randVec(rng, tc.s.E, 1), randVec(rng, tc.s.E, 1)
		out, raw, inv := make([]float64, len(in)), make([]float64, tc.rows*tc.s.qk()), make([]float64, tc.rows*(tc.s.H+tc.s.G))
		loss := func() float64 {
			copy(out, in)
			qkNorm(out, raw, inv, wq, wk, tc.s, tc.rows, 1e-6, tc.workers)
			return dot(r, out)
		}
		loss()
		d := slices.Clone(r) // the v heads pass through: their gradient is r
		dwq, dwk := make([]float64, tc.s.E), make([]float64, tc.s.E)
		qkNormBackward(d, dwq, dwk, raw, inv, wq, wk, make([]float64, tc.workers*tc.s.E), tc.s, tc.rows, tc.workers)
		checkGrad(t, "qknorm.qkv", in, d, nil, loss)
		checkGrad(t, "qknorm.q_norm", wq, dwq, nil, loss)
		checkGrad(t, "qknorm.k_norm", wk, dwk, nil, loss)
	}
}

// TestQKNormInPlace: normed in place (the decoder, scoring) or keeping
// the heads before the norm (training), on one goroutine or several, the
// outputs are the same.
func TestQKNormInPlace(t *testing.T) {
	s, rows := headShape{H: 4, G: 2, E: 8}, 9
	rng := rand.New(rand.NewPCG(22, 1))
	in := randVec(rng, rows*s.stride(), 1)
	wq, wk := randVec(rng, s.E, 1), randVec(rng, s.E, 1)
	var want []float64
	for _, keep := range []bool{true, false} {
		for _, workers := range []int{1, 4} {
			got, inv := slices.Clone(in), make([]float64, rows*(s.H+s.G))
			var raw []float64
			if keep {
				raw = make([]float64, rows*s.qk())
			}
			qkNorm(got, raw, inv, wq, wk, s, rows, 1e-6, workers)
			if want == nil {
				want = got
			}
			if !slices.Equal(got, want) || (keep && !slices.Equal(raw, qkHeads(in, s, rows))) {
				t.Errorf("keep %t, %d workers: outputs or kept heads differ", keep, workers)
			}
		}
	}
}

// qkHeads returns the query and key heads of each row of qkv.
func qkHeads(qkv []float64, s headShape, rows int) []float64 {
	var out []float64
	for r := 0; r < rows; r++ {
		out = append(out, qkv[r*s.stride():r*s.stride()+s.qk()]...)
	}
	return out
}

func TestGradQKVBias(t *testing.T) {
	rng := rand.New(rand.NewPCG(23, 1))
	rows, d, qs := 40, 5, 12 // above minRowsPerWorker: the product splits
	x, w, bias, r := randVec(rng, rows*d, 1), randVec(rng, qs*d, 1), randVec(rng, qs, 1), randVec(rng, rows*qs, 1)
	lw := layerParams[float64]{qkv: w, qkvBias: bias}
	y := make([]float64, rows*qs)
	mm := cpuLinear[float64]{workers: 2}
	loss := func() float64 { projectQKV(mm, y, x, lw, rows, d, qs); return dot(r, y) }
	ones := make([]float64, rows)
	for i := range ones {
		ones[i] = 1
	}
	db, dw, dx := make([]float64, qs), make([]float64, qs*d), make([]float64, rows*d)
	biasBackward(db, r, ones, rows)
	matmulTNAdd(dw, r, x, rows, d, qs, 2)
	matmulNN(dx, r, w, rows, d, qs, false, 2)
	checkGrad(t, "qkv.bias", bias, db, nil, loss)
	checkGrad(t, "qkv.weight", w, dw, nil, loss)
	checkGrad(t, "qkv.x", x, dx, nil, loss)
	lw.qkvBias = nil
	loss()
	y0 := slices.Clone(y)
	lw.qkvBias = make([]float64, qs)
	if loss(); !slices.Equal(y, y0) {
		t.Errorf("a zero bias changes the product")
	}
}

// TestGradRoPEScaled: RoPE with llama3-scaled frequencies is still a
// rotation, undone by its inverse.
func TestGradRoPEScaled(t *testing.T) {
	rng := rand.New(rand.NewPCG(24, 1))
	n, heads, e, extra := 9, 2, 8, 3
	stride := heads*e + extra
	cos, sin := ropeTable[float64](n, e, 100, RopeScaling{Factor: 8, LowFreqFactor: 1, HighFreqFactor: 4, OriginalContext: 6})
	pos := []int32{0, 1, 2, 3, 4, 5, 6, 7, 8}
	x, r := randVec(rng, n*stride, 1), randVec(rng, n*stride, 1)
	y := make([]float64, len(x))
	loss := func() float64 { copy(y, x); rope(y, pos, stride, heads, e, cos, sin, 1, 2); return dot(r, y) }
	dx := slices.Clone(r)
	rope(dx, pos, stride, heads, e, cos, sin, -1, 2)
	checkGrad(t, "rope(llama3).x", x, dx, nil, loss)
}

// TestArchNoDecay: the CPU engine's AdamW leaves the q/k/v biases and the
// q/k norm weights out of weight decay, as it does every norm weight.
func TestArchNoDecay(t *testing.T) {
	for _, arch := range []string{ArchQwen2, ArchQwen3} {
		cfg := contractArch(arch)
		e, err := newCPUEngine(cfg, make([]float32, cfg.NumParams()), DefaultLearnerConfig(), nil)
		if err != nil {
			t.Fatal(err)
		}
		for _, p := range e.params {
			if want := strings.HasSuffix(p.Name, ".bias") || strings.HasSuffix(p.Name, "norm.weight"); p.NoDecay != want {
				t.Errorf("%s: %s NoDecay %t, want %t", arch, p.Name, p.NoDecay, want)
			}
		}
	}
}
