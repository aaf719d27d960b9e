package gpu

import (
	"errors"
	"math"
	"math/rand/v2"
	"reflect"
	"runtime"
	"strings"
	"testing"

	"github.com/mgrpo/mgrpo/gpu/loss"
	"github.com/mgrpo/mgrpo/gpu/optim"
)

// randomSeqs draws n sequences of BOS + prompt (plen tokens) and a
// completion of 1..clen tokens, ids in [3, vocab).
func randomSeqs(rng *rand.Rand, n, plen, clen, vocab int) []Sequence {
	seqs := make([]Sequence, n)
	for i := range seqs {
		p := []int{1}
		for j := 0; j < plen; j++ {
			p = append(p, 3+rng.IntN(vocab-3))
		}
		c := make([]int, 1+rng.IntN(clen))
		for j := range c {
			c[j] = 3 + rng.IntN(vocab-3)
		}
		seqs[i] = Sequence{Prompt: p, Completion: c}
	}
	return seqs
}

func newTinyLearner(t testing.TB, lr float64) (*Model, *Learner) {
	t.Helper()
	tiny, _ := Preset("tiny")
	m, err := NewModel(tiny, 1)
	if err != nil {
		t.Fatal(err)
	}
	lc := DefaultLearnerConfig()
	lc.LR = lr
	l, err := NewLearner(m, lc)
	if err != nil {
		t.Fatal(err)
	}
	return m, l
}

func TestLearnerSupervisedLossFalls(t *testing.T) {
	_, l := newTinyLearner(t, 3e-3)
	seqs := randomSeqs(rand.New(rand.NewPCG(1, 2)), 8, 4, 5, 98)
	first, err := l.SupervisedStep(seqs)
	if err != nil {
		t.Fatal(err)
	}
	// A fresh model is near uniform: loss ≈ ln 98 = 4.585.
	if math.Abs(first.Loss-math.Log(98)) > 0.05 {
		t.Errorf("initial loss %.4f, want ≈ ln 98 = %.4f", first.Loss, math.Log(98))
	}
	var last StepStats
	for i := 0; i < 60; i++ {
		last, _ = l.SupervisedStep(seqs)
	}
	if last.Loss > first.Loss-1 {
		t.Errorf("loss after 60 steps %.3f, want at least 1 nat below the initial %.3f", last.Loss, first.Loss)
	}
	if last.Version != 61 || l.Version() != 61 {
		t.Errorf("version %d/%d after 61 steps", last.Version, l.Version())
	}
}

// Positive weight on a token raises its log-prob, negative lowers it (the
// sign test of policy-and-tasks §6.2), and the loss sees exactly Score's
// log-probs.
func TestLearnerStepSignAndScores(t *testing.T) {
	m, l := newTinyLearner(t, 1e-2)
	seqs := randomSeqs(rand.New(rand.NewPCG(3, 4)), 4, 3, 4, 98)
	b := Batch{Seqs: seqs, Width: 6}
	before, _ := l.Score(seqs, 0.8)
	// The forward-only workspace (shared layer buffers) computes the same.
	if fwd, _ := m.Score(seqs, 0.8); !reflect.DeepEqual(fwd, before) {
		t.Errorf("Model.Score (forward-only workspace) %v differs from the learner's %v", fwd, before)
	}
	adv := []float64{1, -1, 1, -1}
	_, err := l.Step(b, 0.8, func(lp, ent []float64) (loss.Result, error) {
		d := make([]float64, len(lp))
		for i, s := range seqs {
			for t2 := range s.Completion {
				if got, want := lp[i*6+t2], before[i].LogProbs[t2]; math.Abs(got-want) > 1e-6 {
					t.Errorf("loss sees lp[%d,%d] = %g, Score gives %g", i, t2, got, want)
				}
				d[i*6+t2] = -adv[i]
			}
		}
		return loss.Result{Loss: 0, DLogp: d}, nil
	})
	if err != nil {
		t.Fatal(err)
	}
	after, _ := l.Score(seqs, 0.8)
	// The learner's packed weights follow the update: it scores as a model
	// made from its new weights does.
	if snap, _ := l.Snapshot().Score(seqs, 0.8); !reflect.DeepEqual(snap, after) {
		t.Errorf("after the step the learner scores %v, a snapshot of its weights %v", after, snap)
	}
	for i := range seqs {
		var db, da float64
		for t2 := range seqs[i].Completion {
			db += before[i].LogProbs[t2]
			da += after[i].LogProbs[t2]
		}
		if (da-db)*adv[i] <= 0 {
			t.Errorf("sequence %d (advantage %g): log-prob went %g → %g", i, adv[i], db, da)
		}
	}
}

func TestLearnerSnapshotIsImmutable(t *testing.T) {
	m, l := newTinyLearner(t, 1e-2)
	s0 := l.Snapshot()
	w0 := s0.Weights()
	seqs := randomSeqs(rand.New(rand.NewPCG(5, 6)), 4, 3, 3, 98)
	score0, _ := s0.Score(seqs, 1)
	if _, err := l.SupervisedStep(seqs); err != nil {
		t.Fatal(err)
	}
	if got, _ := s0.Score(seqs, 1); !reflect.DeepEqual(got, score0) { // its packed weights too
		t.Errorf("a learner step changed how an earlier snapshot scores: %v, then %v", score0, got)
	}
	s1 := l.Snapshot()
	if s0.Version() != 0 || s1.Version() != 1 {
		t.Errorf("snapshot versions %d, %d; want 0, 1", s0.Version(), s1.Version())
	}
	same := func(a, b []float32) bool {
		for i := range a {
			if a[i] != b[i] {
				return false
			}
		}
		return true
	}
	if !same(s0.Weights(), w0) || !same(m.Weights(), w0) {
		t.Errorf("a learner step changed an earlier snapshot or the starting model")
	}
	if same(s1.Weights(), w0) {
		t.Errorf("the step did not change the weights")
	}
	if err := l.SetWeights(s0); err != nil || !same(l.Snapshot().Weights(), w0) || l.Version() != 0 {
		t.Errorf("SetWeights(s0): err %v, version %d, or weights differ", err, l.Version())
	}
	got, _ := l.Score(seqs, 1)
	if want, _ := s0.Score(seqs, 1); !reflect.DeepEqual(got, want) {
		t.Errorf("after SetWeights(s0) the learner scores %v, s0 %v", got, want)
	}
	small, _ := Preset("small")
	other, _ := NewModel(small, 1)
	if err := l.SetWeights(other); !errors.Is(err, ErrBadInput) {
		t.Errorf("SetWeights with another config: error %v, want ErrBadInput", err)
	}
}

func TestLearnerRejectsBadLoss(t *testing.T) {
	_, l := newTinyLearner(t, 1e-2)
	seqs := randomSeqs(rand.New(rand.NewPCG(7, 8)), 2, 3, 3, 98)
	w0 := l.Snapshot().Weights()
	for name, fn := range map[string]LossFunc{
		"short gradient": func(lp, _ []float64) (loss.Result, error) { return loss.Result{DLogp: lp[:1]}, nil },
		"NaN loss": func(lp, _ []float64) (loss.Result, error) {
			return loss.Result{Loss: math.NaN(), DLogp: make([]float64, len(lp))}, nil
		},
		"Inf gradient": func(lp, _ []float64) (loss.Result, error) {
			d := make([]float64, len(lp))
			d[0] = math.Inf(1)
			return loss.Result{DLogp: d}, nil
		},
	} {
		if _, err := l.Step(Batch{Seqs: seqs}, 1, fn); err == nil {
			t.Errorf("%s: no error", name)
		}
	}
	if l.Version() != 0 {
		t.Errorf("version %d after only failed steps", l.Version())
	}
	for i, v := range l.Snapshot().Weights() {
		if v != w0[i] {
			t.Fatalf("failed steps changed weight %d", i)
		}
	}
}

// The workspace is allocated once per shape: the heap stays flat over many
// steps (policy-and-tasks §4: one graph per shape, reused).
func TestLearnerMemoryFlat(t *testing.T) {
	steps := 1000
	if raceEnabled { // -race makes each step ~40× slower; make test also runs it without
		steps = 200
	}
	_, l := newTinyLearner(t, 1e-3)
	seqs := randomSeqs(rand.New(rand.NewPCG(9, 9)), 16, 6, 8, 98)
	heap := func() uint64 {
		runtime.GC()
		var ms runtime.MemStats
		runtime.ReadMemStats(&ms)
		return ms.HeapAlloc
	}
	for i := 0; i < 20; i++ { // warm up: workspace and optimiser state
		l.SupervisedStep(seqs)
	}
	h0 := heap()
	for i := 0; i < steps; i++ {
		if _, err := l.SupervisedStep(seqs); err != nil {
			t.Fatal(err)
		}
	}
	h1 := heap()
	if h1 > h0+256<<10 {
		t.Errorf("heap grew from %d to %d bytes over %d steps", h0, h1, steps)
	}
	t.Logf("heap %d → %d bytes over %d steps", h0, h1, steps)
}

// The learner drives gpu/loss objectives end to end: GRPO moves log-probs
// by the advantages' sign, and the MaxEnt entropy bonus alone (advantages
// zero) raises the policy's entropy (spec §1.9a).
func TestLearnerWithLossPackage(t *testing.T) {
	_, l := newTinyLearner(t, 1e-2)
	for i := range cpuOf(l).net.w.flat { // a peaked starting policy, so entropy can rise
		cpuOf(l).net.w.flat[i] *= 4
	}
	cpuOf(l).net.repack()
	seqs := randomSeqs(rand.New(rand.NewPCG(11, 12)), 8, 3, 5, 98)
	b := Batch{Seqs: seqs, Width: 5}
	lb := b.LossBatch()
	lb.Advantages = make([]float64, len(seqs))
	cfg := loss.Default()
	entropy := func() float64 {
		sc, _ := l.Score(seqs, 1)
		var s, n float64
		for _, x := range sc {
			for _, h := range x.Entropies {
				s, n = s+h, n+1
			}
		}
		return s / n
	}
	h0 := entropy()
	for i := 0; i < 5; i++ {
		st, err := l.Step(b, 1, func(lp, h []float64) (loss.Result, error) {
			return loss.MaxEntEntropy(cfg, lb, lp, h, 1, 98)
		})
		if err != nil {
			t.Fatal(err)
		}
		if st.Tokens == 0 || st.MeanEntropy <= 0 {
			t.Fatalf("step stats %+v", st)
		}
	}
	if h1 := entropy(); h1 <= h0 {
		t.Errorf("entropy bonus: mean entropy %.4f → %.4f, want a rise", h0, h1)
	}
	lb.Advantages = []float64{1, -1, 1, -1, 1, -1, 1, -1}
	before, _ := l.Score(seqs, 1)
	if _, err := l.Step(b, 1, func(lp, _ []float64) (loss.Result, error) { return loss.Policy(cfg, lb, lp) }); err != nil {
		t.Fatal(err)
	}
	after, _ := l.Score(seqs, 1)
	for i := range seqs {
		var d float64
		for j := range seqs[i].Completion {
			d += after[i].LogProbs[j] - before[i].LogProbs[j]
		}
		if d*lb.Advantages[i] <= 0 {
			t.Errorf("GRPO: sequence %d (advantage %g) log-prob changed by %g", i, lb.Advantages[i], d)
		}
	}
}

// A Model serves concurrent Sample and Score calls (run with -race).
func TestModelConcurrentUse(t *testing.T) {
	tiny, _ := Preset("tiny")
	m, _ := NewModel(tiny, 8)
	seqs := randomSeqs(rand.New(rand.NewPCG(1, 1)), 6, 3, 4, 98)
	want, _ := m.Score(seqs, 1)
	done := make(chan error, 4)
	for i := 0; i < 4; i++ {
		go func() {
			if _, err := m.Sample([][]int{{1, 20, 14}}, 3, SampleOptions{Temperature: 1, MaxNewTokens: 5, Seeds: PromptSeeds(1, 16)}); err != nil {
				done <- err
				return
			}
			got, err := m.Score(seqs, 1)
			if err == nil && !reflect.DeepEqual(got, want) {
				err = errors.New("concurrent Score gave different scores")
			}
			done <- err
		}()
	}
	for i := 0; i < 4; i++ {
		if err := <-done; err != nil {
			t.Error(err)
		}
	}
}

// The learning-rate schedule counts the learner's optimiser steps, not the
// policy version (a warm-started model arrives with version 200).
func TestLearnerScheduleCountsOptimizerSteps(t *testing.T) {
	tiny, _ := Preset("tiny")
	m, _ := NewModel(tiny, 1)
	m.version = 200
	lc := DefaultLearnerConfig()
	lc.Schedule = optim.Schedule{Kind: optim.LinearWarmup, Warmup: 10, Base: 1e-3}
	l, err := NewLearner(m, lc)
	if err != nil {
		t.Fatal(err)
	}
	seqs := randomSeqs(rand.New(rand.NewPCG(2, 2)), 2, 3, 3, 98)
	for step := 0; step < 3; step++ {
		st, err := l.SupervisedStep(seqs)
		if err != nil {
			t.Fatal(err)
		}
		if want := 1e-3 * float64(step+1) / 10; math.Abs(st.LR-want) > 1e-15 || st.Version != int64(201+step) {
			t.Errorf("step %d: lr %g version %d, want %g and %d", step, st.LR, st.Version, want, 201+step)
		}
	}
}

// Resuming from a snapshot plus the saved optimiser state continues
// bit-identically (checkpoint + optimizer.safetensors, DESIGN §5 --resume).
func TestLearnerResume(t *testing.T) {
	_, a := newTinyLearner(t, 3e-3)
	seqs := randomSeqs(rand.New(rand.NewPCG(4, 4)), 4, 3, 3, 98)
	for i := 0; i < 3; i++ {
		a.SupervisedStep(seqs)
	}
	dir := t.TempDir()
	mid := a.Snapshot()
	if err := a.SaveOptimizer(dir); err != nil {
		t.Fatal(err)
	}
	lc := DefaultLearnerConfig()
	lc.LR = 3e-3
	b, _ := NewLearner(mid, lc)
	if err := b.LoadOptimizer(dir); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 2; i++ {
		sa, _ := a.SupervisedStep(seqs)
		sb, _ := b.SupervisedStep(seqs)
		sa.Forward, sa.Backward, sa.Optimizer = 0, 0, 0 // wall-clock times differ
		sb.Forward, sb.Backward, sb.Optimizer = 0, 0, 0
		if sa != sb {
			t.Errorf("step %d after resume: %+v vs %+v", i, sa, sb)
		}
	}
	if !reflect.DeepEqual(a.Snapshot().Weights(), b.Snapshot().Weights()) || b.Version() != 5 {
		t.Errorf("resumed learner diverged (version %d)", b.Version())
	}
}

// TestLearnerRollsBackBadUpdates: an update that leaves weights non-finite
// (lr 1e308: every weight becomes ±Inf or NaN, the fault probe's case) or
// moves them by more than MaxUpdateRatio times their norm is rolled back:
// the step returns ErrBadUpdate, and weights, version and optimiser step
// count are as before, so a later good step is the same as on a learner
// that never saw the bad one.
func TestLearnerRollsBackBadUpdates(t *testing.T) {
	seqs := randomSeqs(rand.New(rand.NewPCG(7, 8)), 4, 3, 4, 98)
	for _, tc := range []struct {
		name  string
		lr    float64
		ratio float64
		want  string
	}{
		{"non-finite", 1e308, 0, "would be NaN"},
		{"non-finite with a ratio", 1e308, 1, "would be NaN"},
		{"exploding", 10, 1, "the weights' norm"},
	} {
		m, _ := Preset("tiny")
		model, _ := NewModel(m, 1)
		lc := DefaultLearnerConfig()
		lc.LR, lc.MaxUpdateRatio = tc.lr, tc.ratio
		l, err := NewLearner(model, lc)
		if err != nil {
			t.Fatal(err)
		}
		w0 := model.Weights()
		_, err = l.SupervisedStep(seqs)
		if !errors.Is(err, ErrBadUpdate) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: error %v, want ErrBadUpdate mentioning %q", tc.name, err, tc.want)
		}
		if l.Version() != 0 || l.eng.Steps() != 0 {
			t.Errorf("%s: version %d, optimiser steps %d after a rolled-back step", tc.name, l.Version(), l.eng.Steps())
		}
		if !reflect.DeepEqual(l.Snapshot().Weights(), w0) {
			t.Errorf("%s: weights changed by a rolled-back step", tc.name)
		}
	}
	// A rollback leaves the learner as it was: the next step equals a fresh one's.
	_, good := newTinyLearner(t, 1e-3)
	_, rolled := newTinyLearner(t, 1e-3)
	rolled.lc.Schedule.Base = 1e308
	if _, err := rolled.SupervisedStep(seqs); !errors.Is(err, ErrBadUpdate) {
		t.Fatalf("lr 1e308: %v", err)
	}
	rolled.lc.Schedule.Base = 1e-3
	a, errA := good.SupervisedStep(seqs)
	b, errB := rolled.SupervisedStep(seqs)
	if errA != nil || errB != nil || a.Loss != b.Loss || !reflect.DeepEqual(good.Snapshot().Weights(), rolled.Snapshot().Weights()) {
		t.Errorf("step after a rollback differs from a fresh learner's (%v, %v)", errA, errB)
	}
}

// TestLearnerCPUDeviceIsTheDefault: a learner given the CPU device (as
// every run's learner is) splits its batches into shards as one given no
// device does, and takes the same steps.
func TestLearnerCPUDeviceIsTheDefault(t *testing.T) {
	m, _ := newTinyLearner(t, 1e-3)
	seqs := randomSeqs(rand.New(rand.NewPCG(3, 4)), 16, 4, 6, 98)
	var learners []*Learner
	for _, dev := range []Device{nil, CPU{}} {
		lc := DefaultLearnerConfig()
		lc.LR, lc.Device = 1e-3, dev
		l, err := NewLearner(m, lc)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := l.SupervisedStep(seqs); err != nil {
			t.Fatal(err)
		}
		learners = append(learners, l)
	}
	a, b := learners[0], learners[1]
	if want := learnerShards(m.cfg, cpuModelOf(m).net.workers, false); cpuOf(a).shards != want || cpuOf(b).shards != want {
		t.Errorf("shards %d without a device, %d with the CPU device; want %d", cpuOf(a).shards, cpuOf(b).shards, want)
	}
	if !reflect.DeepEqual(a.Snapshot().Weights(), b.Snapshot().Weights()) {
		t.Error("the CPU device's step differs from the default's")
	}
}
