package optim

import (
	"errors"
	"math"
	"math/rand/v2"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/mgrpo/mgrpo/gpu/safetensors"
)

// adamwRef is torch.optim.AdamW's update rule, written out in float64.
func adamwRef(w, g, m, v []float64, t int, lr, b1, b2, eps, wd float64) {
	bc1 := 1 - math.Pow(b1, float64(t))
	bc2 := 1 - math.Pow(b2, float64(t))
	for i := range w {
		w[i] -= lr * wd * w[i]
		m[i] = b1*m[i] + (1-b1)*g[i]
		v[i] = b2*v[i] + (1-b2)*g[i]*g[i]
		w[i] -= lr / bc1 * m[i] / (math.Sqrt(v[i])/math.Sqrt(bc2) + eps)
	}
}

func TestAdamWFirstStepByHand(t *testing.T) {
	// At t = 1 bias correction makes m̂ = g and v̂ = g², so the update is
	// lr·g/(|g|+eps) ≈ lr·sign(g): w=1, g=0.5, lr=0.1, wd=0.01 →
	// 1 − 0.1·0.01·1 − 0.1·0.5/(0.5+1e-8) = 0.899000002 (hand computed).
	o, err := NewAdamW(0.1, 0.9, 0.999, 1e-8, 0.01)
	if err != nil {
		t.Fatal(err)
	}
	p := []Param{{Name: "w", W: []float32{1, -2}, G: []float32{0.5, 0}}}
	o.Step(p, 0.1)
	want := []float64{0.899000002, -2 * (1 - 0.001)} // g = 0: only the decay acts
	for i := range want {
		if math.Abs(float64(p[0].W[i])-want[i]) > 1e-7 {
			t.Errorf("w[%d] = %v, want %v", i, p[0].W[i], want[i])
		}
	}
}

func TestAdamWMatchesReference(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	const n, steps = 50, 20
	lr, b1, b2, eps, wd := 3e-3, 0.9, 0.95, 1e-8, 0.1
	o, _ := NewAdamW(lr, b1, b2, eps, wd)
	w32, g32 := make([]float32, n), make([]float32, n)
	w64, g64, m64, v64 := make([]float64, n), make([]float64, n), make([]float64, n), make([]float64, n)
	for i := range w32 {
		w32[i] = float32(rng.NormFloat64())
		w64[i] = float64(w32[i])
	}
	for s := 1; s <= steps; s++ {
		for i := range g32 {
			g32[i] = float32(rng.NormFloat64())
			g64[i] = float64(g32[i])
		}
		o.Step([]Param{{Name: "w", W: w32, G: g32}}, lr)
		adamwRef(w64, g64, m64, v64, s, lr, b1, b2, eps, wd)
	}
	for i := range w32 {
		if d := math.Abs(float64(w32[i]) - w64[i]); d > 1e-5 {
			t.Fatalf("after %d steps w[%d] = %v, float64 reference %v", steps, i, w32[i], w64[i])
		}
	}
	if o.StepCount() != steps {
		t.Errorf("StepCount = %d", o.StepCount())
	}
}

func TestWeightDecayDecoupled(t *testing.T) {
	// With g = 0 the moments stay 0 and AdamW only shrinks w by (1 − lr·wd),
	// unlike L2-in-the-gradient Adam, whose update would be ≈ lr·sign(w).
	o, _ := NewAdamW(0.5, 0.9, 0.999, 1e-8, 0.2)
	p := []Param{
		{Name: "matrix", W: []float32{4}, G: []float32{0}},
		{Name: "norm", W: []float32{4}, G: []float32{0}, NoDecay: true},
	}
	o.Step(p, 0.5)
	if got, want := p[0].W[0], float32(4*(1-0.5*0.2)); got != want {
		t.Errorf("decayed w = %v, want %v", got, want)
	}
	if got := p[1].W[0]; got != 4 {
		t.Errorf("NoDecay w = %v, want 4", got)
	}
}

func TestClipGlobalNorm(t *testing.T) {
	cases := []struct {
		name     string
		maxNorm  float64
		wantNorm float64
		wantG    []float32
	}{
		{"no clip (max 0)", 0, 13, []float32{3, 4, 12}},
		{"below max", 20, 13, []float32{3, 4, 12}},
		{"clipped to 1", 1, 13, []float32{3 / (13 + 1e-6), 4 / (13 + 1e-6), 12 / (13 + 1e-6)}}, // 3-4-12-13 triangle
	}
	for _, c := range cases {
		p := []Param{{Name: "a", W: make([]float32, 2), G: []float32{3, 4}}, {Name: "b", W: make([]float32, 1), G: []float32{12}}}
		got := ClipGlobalNorm(p, c.maxNorm, 1)
		if got != c.wantNorm {
			t.Errorf("%s: norm = %v, want %v", c.name, got, c.wantNorm)
		}
		g := append(append([]float32{}, p[0].G...), p[1].G...)
		for i := range g {
			if math.Abs(float64(g[i]-c.wantG[i])) > 1e-7 {
				t.Errorf("%s: g = %v, want %v", c.name, g, c.wantG)
				break
			}
		}
	}
	p := []Param{{Name: "a", W: make([]float32, 1), G: []float32{float32(math.Inf(1))}}}
	if n := ClipGlobalNorm(p, 1, 1); !math.IsInf(n, 1) || !math.IsInf(float64(p[0].G[0]), 1) {
		t.Errorf("inf grad: norm %v, g %v; want +Inf and unchanged", n, p[0].G)
	}
}

func TestSchedule(t *testing.T) {
	cases := []struct {
		name string
		s    Schedule
		step int
		want float64
	}{
		{"constant", Schedule{Kind: Constant, Base: 1e-3}, 500, 1e-3},
		{"warmup first step", Schedule{Kind: LinearWarmup, Warmup: 10, Base: 1}, 0, 0.1},
		{"warmup middle", Schedule{Kind: LinearWarmup, Warmup: 10, Base: 1}, 4, 0.5},
		{"warmup last", Schedule{Kind: LinearWarmup, Warmup: 10, Base: 1}, 9, 1},
		{"after warmup", Schedule{Kind: LinearWarmup, Warmup: 10, Base: 1}, 1000, 1},
		{"cosine start", Schedule{Kind: Cosine, Warmup: 10, Total: 110, Base: 1, Min: 0.1}, 10, 1},
		{"cosine half", Schedule{Kind: Cosine, Warmup: 10, Total: 110, Base: 1, Min: 0.1}, 60, 0.55},                              // Min + (Base−Min)/2
		{"cosine quarter", Schedule{Kind: Cosine, Warmup: 10, Total: 110, Base: 1, Min: 0.1}, 35, 0.1 + 0.9*0.5*(1+math.Sqrt2/2)}, // cos(π/4)
		{"cosine end", Schedule{Kind: Cosine, Warmup: 10, Total: 110, Base: 1, Min: 0.1}, 110, 0.1},
		{"cosine after end", Schedule{Kind: Cosine, Warmup: 10, Total: 110, Base: 1, Min: 0.1}, 500, 0.1},
		{"cosine no warmup", Schedule{Kind: Cosine, Total: 100, Base: 2}, 0, 2},
		{"linear warmup", Schedule{Kind: LinearDecay, Warmup: 10, Total: 110, Base: 1}, 4, 0.5},
		{"linear start", Schedule{Kind: LinearDecay, Warmup: 10, Total: 110, Base: 1}, 10, 1},
		{"linear quarter", Schedule{Kind: LinearDecay, Warmup: 10, Total: 110, Base: 1}, 35, 0.75},
		{"linear to min", Schedule{Kind: LinearDecay, Total: 100, Base: 1, Min: 0.2}, 50, 0.6},
		{"linear end", Schedule{Kind: LinearDecay, Total: 100, Base: 1}, 100, 0},
		{"linear after end", Schedule{Kind: LinearDecay, Total: 100, Base: 1}, 300, 0},
	}
	for _, c := range cases {
		if err := c.s.Validate(); err != nil {
			t.Errorf("%s: %v", c.name, err)
		}
		if got := c.s.LR(c.step); math.Abs(got-c.want) > 1e-12 {
			t.Errorf("%s: LR(%d) = %v, want %v", c.name, c.step, got, c.want)
		}
	}
}

func TestValidation(t *testing.T) {
	bad := []struct {
		err  error
		want string
	}{
		{Schedule{Kind: "step", Base: 1}.Validate(), `schedule kind = "step"`},
		{Schedule{Kind: LinearDecay, Warmup: 5, Total: 5, Base: 1}.Validate(), "linear needs total > warmup 5"},
		{Schedule{Kind: Constant, Warmup: 3, Base: 1}.Validate(), "warmup = 3"},
		{Schedule{Kind: Cosine, Warmup: 3, Total: 3, Base: 1}.Validate(), "total = 3"},
		{Schedule{Kind: Cosine, Total: 9, Base: 1, Min: 2}.Validate(), "min lr = 2"},
		{(&AdamW{LR: 1, Beta1: 1, Beta2: 0.9, Eps: 1e-8}).Validate(), "beta1 = 1"},
		{(&AdamW{LR: 1, Beta1: 0.9, Beta2: 0.9, Eps: 0}).Validate(), "eps = 0"},
		{(&AdamW{LR: math.NaN(), Beta1: 0.9, Beta2: 0.9, Eps: 1}).Validate(), "lr = NaN"},
		{(&AdamW{LR: 1, Beta1: 0.9, Beta2: 0.9, Eps: 1, WeightDecay: -1}).Validate(), "weight_decay = -1"},
	}
	for _, b := range bad {
		if b.err == nil || !errors.Is(b.err, ErrConfig) || !strings.Contains(b.err.Error(), b.want) {
			t.Errorf("error = %v, want ErrConfig containing %q", b.err, b.want)
		}
	}
}

// newParams returns two params with deterministic weights.
func newParams(seed uint64) []Param {
	rng := rand.New(rand.NewPCG(seed, 7))
	ps := []Param{{Name: "layers.0.w", W: make([]float32, 12), G: make([]float32, 12)},
		{Name: "norm.weight", W: make([]float32, 4), G: make([]float32, 4), NoDecay: true}}
	for _, p := range ps {
		for i := range p.W {
			p.W[i] = float32(rng.NormFloat64())
		}
	}
	return ps
}

func fillGrads(ps []Param, rng *rand.Rand) {
	for _, p := range ps {
		for i := range p.G {
			p.G[i] = float32(rng.NormFloat64())
		}
	}
}

func TestStateRoundTrip(t *testing.T) {
	path := filepath.Join(t.TempDir(), StateFileName)
	// Uninterrupted: 6 steps. Interrupted: 3 steps, save, fresh optimiser
	// loads, 3 more steps. Weights must be bit-identical.
	runA, runB := newParams(1), newParams(1)
	gA, gB := rand.New(rand.NewPCG(3, 3)), rand.New(rand.NewPCG(3, 3))
	optA, _ := NewAdamW(1e-2, 0.9, 0.99, 1e-8, 0.1)
	optB, _ := NewAdamW(1e-2, 0.9, 0.99, 1e-8, 0.1)
	for s := 0; s < 6; s++ {
		fillGrads(runA, gA)
		optA.Step(runA, 1e-2)
	}
	for s := 0; s < 3; s++ {
		fillGrads(runB, gB)
		optB.Step(runB, 1e-2)
	}
	if err := optB.SaveState(path); err != nil {
		t.Fatal(err)
	}
	optC, _ := NewAdamW(1e-2, 0.9, 0.99, 1e-8, 0.1)
	reversed := []Param{runB[1], runB[0]}
	if err := optC.LoadState(path, reversed); err != nil {
		t.Fatal(err)
	}
	if optC.StepCount() != 3 {
		t.Fatalf("StepCount after load = %d, want 3", optC.StepCount())
	}
	for s := 0; s < 3; s++ {
		fillGrads(runB, gB)
		optC.Step(reversed, 1e-2)
	}
	for i := range runA {
		for j := range runA[i].W {
			if runA[i].W[j] != runB[i].W[j] {
				t.Fatalf("%s[%d]: resumed %v, uninterrupted %v", runA[i].Name, j, runB[i].W[j], runA[i].W[j])
			}
		}
	}
	f, err := safetensors.Read(path)
	if err != nil {
		t.Fatal(err)
	}
	if m := f.Metadata(); m["step"] != "3" || m["beta2"] != "0.99" || m["weight_decay"] != "0.1" {
		t.Errorf("metadata = %v", m)
	}
}

func TestLoadStateMismatch(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, StateFileName)
	ps := newParams(1)
	o, _ := NewAdamW(1e-2, 0.9, 0.99, 1e-8, 0)
	o.Step(ps, 1e-2)
	if err := o.SaveState(path); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name   string
		params []Param
		want   string
	}{
		{"renamed", []Param{{Name: "other", W: make([]float32, 12)}, ps[1]}, `tensor "other.exp_avg"`},
		{"resized", []Param{{Name: "layers.0.w", W: make([]float32, 11)}, ps[1]}, `tensor "layers.0.w.exp_avg": shape [12], want [11]`},
		{"missing param", []Param{ps[0]}, `tensor "norm.weight.exp_avg" belongs to no parameter`},
	}
	for _, c := range cases {
		fresh, _ := NewAdamW(1e-2, 0.9, 0.99, 1e-8, 0)
		err := fresh.LoadState(path, c.params)
		if !errors.Is(err, ErrState) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: LoadState error = %v, want ErrState containing %q", c.name, err, c.want)
		}
		if fresh.StepCount() != 0 {
			t.Errorf("%s: failed LoadState changed the optimiser", c.name)
		}
	}
	if err := safetensors.Write(filepath.Join(dir, "x"), nil, map[string]string{"format": "other"}); err != nil {
		t.Fatal(err)
	}
	if err := o.LoadState(filepath.Join(dir, "x"), ps); !errors.Is(err, ErrState) {
		t.Errorf("foreign file: error = %v", err)
	}
}

func TestStepAllocs(t *testing.T) {
	ps := newParams(1)
	o, _ := NewAdamW(1e-2, 0.9, 0.99, 1e-8, 0.1)
	o.Step(ps, 1e-2)
	if a := testing.AllocsPerRun(10, func() { o.Step(ps, 1e-2) }); a != 0 {
		t.Errorf("Step allocates %v times per call, want 0", a)
	}
}

// BenchmarkAdamWStep measures one AdamW step over the `base` preset's
// parameter count (~0.85M, DESIGN §4) split as a transformer would be.
func BenchmarkAdamWStep(b *testing.B) {
	rng := rand.New(rand.NewPCG(1, 1))
	var ps []Param
	total := 0
	for i := 0; total < 1<<20; i++ {
		n := 128 * 384
		if i%5 == 4 {
			n = 128
		}
		p := Param{Name: "p" + string(rune('a'+i%26)) + strings.Repeat("x", i/26), W: make([]float32, n), G: make([]float32, n), NoDecay: n == 128}
		for j := range p.W {
			p.W[j], p.G[j] = float32(rng.NormFloat64()), float32(rng.NormFloat64())
		}
		ps = append(ps, p)
		total += n
	}
	o, _ := NewAdamW(1e-3, 0.9, 0.999, 1e-8, 0.01)
	b.SetBytes(int64(total) * 4 * 4) // w, g, m, v
	b.ResetTimer()
	for b.Loop() {
		o.Step(ps, 1e-3)
	}
	b.ReportMetric(float64(total), "params")
}

func BenchmarkClipGlobalNorm(b *testing.B) {
	ps := []Param{{Name: "w", W: make([]float32, 1<<20), G: make([]float32, 1<<20)}}
	for i := range ps[0].G {
		ps[0].G[i] = 1
	}
	for b.Loop() {
		ClipGlobalNorm(ps, 1e9, 1)
	}
}

// Split over several goroutines, Step gives the same weights and
// ClipGlobalNorm the same norm (to rounding) as on one.
func TestWorkersDoNotChangeResults(t *testing.T) {
	mk := func() []Param {
		var ps []Param
		for i, n := range []int{70000, 3, 50000, 1} {
			w, g := make([]float32, n), make([]float32, n)
			for j := range w {
				w[j], g[j] = float32(j%13)*0.1, float32((j*7+i)%11)-5
			}
			ps = append(ps, Param{Name: string(rune('a' + i)), W: w, G: g, NoDecay: i == 1})
		}
		return ps
	}
	a, b := mk(), mk()
	na, nb := ClipGlobalNorm(a, 10, 1), ClipGlobalNorm(b, 10, 3)
	if math.Abs(na-nb) > 1e-12*na {
		t.Errorf("norm %v on one goroutine, %v on three", na, nb)
	}
	oa, _ := NewAdamW(1e-2, 0.9, 0.999, 1e-8, 0.01)
	ob, _ := NewAdamW(1e-2, 0.9, 0.999, 1e-8, 0.01)
	ob.Workers = 3
	for step := 0; step < 3; step++ {
		oa.Step(a, 1e-2)
		ob.Step(b, 1e-2)
	}
	for i := range a {
		for j := range a[i].W {
			if a[i].W[j] != b[i].W[j] {
				t.Fatalf("param %d[%d]: %v on one goroutine, %v on three", i, j, a[i].W[j], b[i].W[j])
			}
		}
	}
}

// bigParams are parameters large enough for split to use several
// goroutines, with a 1-D one between the matrices.
func bigParams(seed uint64) []Param {
	rng := rand.New(rand.NewPCG(seed, 3))
	var ps []Param
	for i, n := range []int{70000, 3, 50000} {
		w, g := make([]float32, n), make([]float32, n)
		for j := range w {
			w[j], g[j] = float32(rng.NormFloat64()), float32(rng.NormFloat64())
		}
		ps = append(ps, Param{Name: string(rune('a' + i)), W: w, G: g, NoDecay: i == 1})
	}
	return ps
}

func cloneParams(ps []Param) []Param {
	out := make([]Param, len(ps))
	for i, p := range ps {
		out[i] = Param{Name: p.Name, W: slices.Clone(p.W), G: slices.Clone(p.G), NoDecay: p.NoDecay}
	}
	return out
}

// sameBits reports whether a and b hold the same bits (NaN equals NaN).
func sameBits(a, b []Param) bool {
	for i := range a {
		for j := range a[i].W {
			if math.Float32bits(a[i].W[j]) != math.Float32bits(b[i].W[j]) || math.Float32bits(a[i].G[j]) != math.Float32bits(b[i].G[j]) {
				return false
			}
		}
	}
	return len(a) == len(b)
}

// TestPreviewIsTheStep: Preview changes nothing (weights, moments, step
// count), and its norms are those of the Step that follows it, measured
// from the weights before and after; on one goroutine or three.
func TestPreviewIsTheStep(t *testing.T) {
	for _, workers := range []int{1, 3} {
		ps := bigParams(1)
		o, _ := NewAdamW(1e-2, 0.9, 0.99, 1e-8, 0.1)
		o.Workers = workers
		o.Step(ps, 1e-2) // moments that are not zero
		fillGrads(ps, rand.New(rand.NewPCG(2, 2)))
		before, moments := cloneParams(ps), slices.Clone(o.state)
		for i := range moments {
			moments[i].m, moments[i].v = slices.Clone(o.state[i].m), slices.Clone(o.state[i].v)
		}
		u, err := o.Preview(ps, 3e-2)
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(ps, before) || !reflect.DeepEqual(o.state, moments) || o.StepCount() != 1 {
			t.Fatalf("workers %d: Preview changed the parameters or the optimiser", workers)
		}
		o.Step(ps, 3e-2)
		var delta, norm float64
		for i, p := range ps {
			for j, w := range p.W {
				d := float64(w) - float64(before[i].W[j])
				delta += d * d
				norm += float64(before[i].W[j]) * float64(before[i].W[j])
			}
		}
		if d, n := math.Sqrt(delta), math.Sqrt(norm); math.Abs(u.Norm-d) > 1e-12*d || math.Abs(u.WeightNorm-n) > 1e-12*n || d == 0 {
			t.Errorf("workers %d: Preview norms %v, %v; the step's %v, %v", workers, u.Norm, u.WeightNorm, d, n)
		}
	}
}

// TestPreviewNamesWhatWouldNotBeFinite: a step that would make a weight or
// moment non-finite is refused by Preview naming the first such element,
// and nothing changes.
func TestPreviewNamesWhatWouldNotBeFinite(t *testing.T) {
	for _, tc := range []struct {
		name  string
		lr    float64
		setup func(ps []Param)
		want  string
	}{
		{"lr 1e308", 1e308, func([]Param) {}, "weight a[0] would be"},
		{"NaN gradient", 1e-2, func(ps []Param) { ps[2].G[40000] = float32(math.NaN()) }, "c.exp_avg[40000] would be NaN"},
		{"infinite gradient", 1e-2, func(ps []Param) { ps[1].G[2] = float32(math.Inf(-1)) }, "b.exp_avg[2] would be -Inf"},
		{"huge gradient", 1e-2, func(ps []Param) { ps[2].G[7] = 1e30 }, "c.exp_avg_sq[7] would be +Inf"},
	} {
		for _, workers := range []int{1, 3} {
			ps := bigParams(4)
			tc.setup(ps)
			before := cloneParams(ps)
			o, _ := NewAdamW(1e-2, 0.9, 0.99, 1e-8, 0.1)
			o.Workers = workers
			_, err := o.Preview(ps, tc.lr)
			if !errors.Is(err, ErrNonFinite) || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("%s, workers %d: error %v, want ErrNonFinite containing %q", tc.name, workers, err, tc.want)
			}
			if !sameBits(ps, before) || o.StepCount() != 0 {
				t.Errorf("%s, workers %d: a refused Preview changed something", tc.name, workers)
			}
		}
	}
}

// TestLoadStateRefusesBadMoments: a NaN or infinite moment, or a negative
// second moment, in optimizer.safetensors is refused naming the tensor,
// and the optimiser is left unchanged.
func TestLoadStateRefusesBadMoments(t *testing.T) {
	ps := newParams(1)
	o, _ := NewAdamW(1e-2, 0.9, 0.99, 1e-8, 0)
	fillGrads(ps, rand.New(rand.NewPCG(1, 1)))
	o.Step(ps, 1e-2)
	for _, tc := range []struct {
		name, tensor string
		value        float32
		want         string
	}{
		{"NaN exp_avg", "layers.0.w.exp_avg", float32(math.NaN()), "layers.0.w.exp_avg[2] = NaN: not finite"},
		{"Inf exp_avg", "norm.weight.exp_avg", float32(math.Inf(1)), "norm.weight.exp_avg[2] = +Inf: not finite"},
		{"negative exp_avg_sq", "layers.0.w.exp_avg_sq", -1, "layers.0.w.exp_avg_sq[2] = -1: must be finite and >= 0"},
		{"NaN exp_avg_sq", "norm.weight.exp_avg_sq", float32(math.NaN()), "norm.weight.exp_avg_sq[2] = NaN"},
	} {
		path := filepath.Join(t.TempDir(), StateFileName)
		if err := o.SaveState(path); err != nil {
			t.Fatal(err)
		}
		f, err := safetensors.Read(path)
		if err != nil {
			t.Fatal(err)
		}
		var ts []safetensors.Tensor
		for _, name := range f.Tensors() {
			v, shape, _ := f.Float32(name)
			v = append([]float32(nil), v...)
			if name == tc.tensor {
				v[2] = tc.value
			}
			ts = append(ts, safetensors.Tensor{Name: name, Shape: shape, F32: v})
		}
		if err := safetensors.Write(path, ts, f.Metadata()); err != nil {
			t.Fatal(err)
		}
		fresh, _ := NewAdamW(1e-2, 0.9, 0.99, 1e-8, 0)
		err = fresh.LoadState(path, ps)
		if !errors.Is(err, ErrState) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: LoadState error = %v, want ErrState containing %q", tc.name, err, tc.want)
		}
		if fresh.StepCount() != 0 {
			t.Errorf("%s: a refused state changed the optimiser", tc.name)
		}
	}
}

// TestStateInOut: the state handed out by State and taken back by
// SetState (what an engine that keeps its moments elsewhere does) resumes
// bit-identically, and WriteState/ReadState carry it through a file.
func TestStateInOut(t *testing.T) {
	runA, runB := newParams(1), newParams(1)
	gA, gB := rand.New(rand.NewPCG(5, 5)), rand.New(rand.NewPCG(5, 5))
	optA, _ := NewAdamW(1e-2, 0.9, 0.99, 1e-8, 0.1)
	optB, _ := NewAdamW(1e-2, 0.9, 0.99, 1e-8, 0.1)
	for s := 0; s < 4; s++ {
		fillGrads(runA, gA)
		optA.Step(runA, 1e-2)
		if s < 2 {
			fillGrads(runB, gB)
			optB.Step(runB, 1e-2)
		}
	}
	st := copiedState(optB)
	optC, _ := NewAdamW(1e-2, 0.9, 0.99, 1e-8, 0.1)
	if err := optC.SetState(st, runB); err != nil {
		t.Fatal(err)
	}
	for s := 0; s < 2; s++ {
		fillGrads(runB, gB)
		optC.Step(runB, 1e-2)
	}
	for i := range runA {
		if !slices.Equal(runA[i].W, runB[i].W) {
			t.Errorf("%s: resumed through State/SetState differs from uninterrupted", runA[i].Name)
		}
	}
	path := filepath.Join(t.TempDir(), StateFileName)
	if err := optC.WriteState(path, optC.State()); err != nil {
		t.Fatal(err)
	}
	back, err := ReadState(path, Shapes(runB))
	if err != nil || !reflect.DeepEqual(back, optC.State()) {
		t.Errorf("ReadState(WriteState(State())) = step %d, %v; want the state back", back.Step, err)
	}
}

// copiedState is o's state with its moments copied, as a device hands
// them over.
func copiedState(o *AdamW) State {
	st := o.State()
	for i := range st.Moments {
		st.Moments[i].ExpAvg = slices.Clone(st.Moments[i].ExpAvg)
		st.Moments[i].ExpAvgSq = slices.Clone(st.Moments[i].ExpAvgSq)
	}
	return st
}

// TestSetStateRefuses: a state that does not fit the parameters, or holds
// a non-finite moment, is refused naming what is wrong, and the optimiser
// is left unchanged.
func TestSetStateRefuses(t *testing.T) {
	ps := newParams(1)
	o, _ := NewAdamW(1e-2, 0.9, 0.99, 1e-8, 0.1)
	fillGrads(ps, rand.New(rand.NewPCG(5, 5)))
	o.Step(ps, 1e-2)
	st := copiedState(o)
	bad := func(edit func(*State)) State {
		c := State{Step: st.Step, Moments: slices.Clone(st.Moments)}
		edit(&c)
		return c
	}
	nan := slices.Clone(st.Moments[0].ExpAvg)
	nan[1] = float32(math.NaN())
	for _, tc := range []struct {
		name string
		st   State
		want string
	}{
		{"too few", bad(func(s *State) { s.Moments = s.Moments[:1] }), "1 moments for 2 parameters"},
		{"renamed", bad(func(s *State) { s.Moments[0].Name = "other" }), `moments 0 are "other"`},
		{"resized", bad(func(s *State) { s.Moments[1].ExpAvgSq = s.Moments[1].ExpAvgSq[:1] }), `parameter "norm.weight"`},
		{"NaN", bad(func(s *State) { s.Moments[0].ExpAvg = nan }), "exp_avg[1] = NaN"},
		{"negative step", bad(func(s *State) { s.Step = -1 }), "step -1"},
	} {
		fresh, _ := NewAdamW(1e-2, 0.9, 0.99, 1e-8, 0.1)
		if err := fresh.SetState(tc.st, ps); !errors.Is(err, ErrState) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: SetState error %v, want ErrState containing %q", tc.name, err, tc.want)
		}
		if fresh.StepCount() != 0 || fresh.state != nil {
			t.Errorf("%s: a refused state changed the optimiser", tc.name)
		}
	}
}
