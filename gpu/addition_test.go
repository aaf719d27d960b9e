package gpu

import (
	"fmt"
	"math/rand/v2"
	"strconv"
	"testing"
	"time"

	"github.com/mgrpo/mgrpo/internal/tokenizer"
)

// additionProblem is "a+b=" with its answer, both encoded: BOS + prompt, and
// the digits of a+b + EOS.
func additionProblem(tok tokenizer.Tokenizer, a, b int) Sequence {
	p, _ := tok.Encode(fmt.Sprintf("%d+%d=", a, b))
	c, _ := tok.Encode(strconv.Itoa(a + b))
	return Sequence{Prompt: append([]int{tok.BOS()}, p...), Completion: append(c, tok.EOS())}
}

// greedyAccuracy is the fraction of problems whose greedy completion is
// exactly the answer followed by EOS.
func greedyAccuracy(t *testing.T, m *Model, probs []Sequence) float64 {
	prompts := make([][]int, len(probs))
	for i, p := range probs {
		prompts[i] = p.Prompt
	}
	out, err := m.Sample(prompts, 1, SampleOptions{Greedy: true, MaxNewTokens: 5, EOS: tokenizer.EosID})
	if err != nil {
		t.Fatal(err)
	}
	right := 0
	for i, s := range out {
		if fmt.Sprint(s.Tokens) == fmt.Sprint(probs[i].Completion) {
			right++
		}
	}
	return float64(right) / float64(len(probs))
}

// TestLongSupervisedAddition trains the tiny preset on 2-digit addition
// (policy-and-tasks §5: the warm start) and requires greedy exact-match
// accuracy ≥ 20% on held-out problems, where guessing is < 1%.
func TestLongSupervisedAddition(t *testing.T) {
	if testing.Short() || raceEnabled {
		t.Skip("learning test: skipped under -short and -race (about 30 s without)")
	}
	tok := tokenizer.NewChar()
	rng := rand.New(rand.NewPCG(2026, 11))
	draw := func(n int) []Sequence {
		s := make([]Sequence, n)
		for i := range s {
			s[i] = additionProblem(tok, rng.IntN(100), rng.IntN(100))
		}
		return s
	}
	held := draw(256)
	tiny, _ := Preset("tiny")
	m, _ := NewModel(tiny, 1)
	lc := DefaultLearnerConfig()
	lc.LR, lc.WeightDecay = 3e-3, 0
	l, err := NewLearner(m, lc)
	if err != nil {
		t.Fatal(err)
	}
	start, acc := time.Now(), 0.0
	for step := 1; step <= 3000 && acc < 0.3; step++ {
		st, err := l.SupervisedStep(draw(128))
		if err != nil {
			t.Fatal(err)
		}
		if step%100 == 0 {
			acc = greedyAccuracy(t, l.Snapshot(), held)
			t.Logf("step %d: loss %.3f, greedy accuracy %.1f%% (%.1fs)", step, st.Loss, 100*acc, time.Since(start).Seconds())
		}
	}
	if acc < 0.2 {
		t.Errorf("greedy accuracy %.1f%% after training, want ≥ 20%%", 100*acc)
	}
}
