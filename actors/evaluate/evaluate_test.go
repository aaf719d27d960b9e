package evaluate

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"strings"
	"sync"
	"testing"

	"github.com/mgrpo/mgrpo/rewards/tasks"
)

// okTask is a task whose verdicts the test controls: "" is Malformed, text
// starting with "ok" is Correct, anything else Wrong; Canonical removes
// spaces.
type okTask struct{}

func (okTask) Name() string { return "ok" }
func (okTask) Generate(rng *rand.Rand) tasks.Problem {
	return tasks.Problem{Prompt: fmt.Sprintf("q%d", rng.Uint64()), Answer: "ok"}
}
func (okTask) Verify(completion, _ string) tasks.Verdict {
	switch {
	case completion == "":
		return tasks.Malformed
	case strings.HasPrefix(completion, "ok"):
		return tasks.Correct
	}
	return tasks.Wrong
}
func (okTask) Solution(tasks.Problem, *rand.Rand) (string, error) { return "ok", nil }
func (okTask) Canonical(c string) string                          { return strings.ReplaceAll(c, " ", "") }

// scriptSampler answers prompt i (by its position in the evaluation
// problems) with greedy[i] at temperature 0 and samples[i][j] otherwise.
// Each completion has len(text) tokens of entropy 0.5 nats each.
type scriptSampler struct {
	index   map[string]int
	greedy  []string
	samples [][]string

	mu    sync.Mutex
	seeds []uint64
	calls int
}

func newScriptSampler(task tasks.Task, seed uint64, greedy []string, samples [][]string) *scriptSampler {
	idx := map[string]int{}
	for i, p := range Problems(task, len(greedy), seed) {
		idx[p.Prompt] = i
	}
	return &scriptSampler{index: idx, greedy: greedy, samples: samples}
}

func (s *scriptSampler) Sample(_ context.Context, prompts []string, n int, temperature float64, seed uint64) ([]Completion, error) {
	s.mu.Lock()
	s.seeds = append(s.seeds, seed)
	s.calls++
	s.mu.Unlock()
	var out []Completion
	for _, p := range prompts {
		i := s.index[p]
		for j := range n {
			text := s.greedy[i]
			if temperature > 0 {
				text = s.samples[i][j]
			}
			out = append(out, Completion{Text: text, Tokens: len(text), EntropySum: 0.5 * float64(len(text))})
		}
	}
	return out, nil
}

func TestRunExactMetrics(t *testing.T) {
	// Hand-computed (N = 3, K = 4):
	//   prompt 0: greedy correct; samples correct 3 ("ok1", "ok 1", "ok2"),
	//             distinct canonical {ok1, ok2} = 2
	//   prompt 1: greedy wrong;   samples correct 0, distinct 0
	//   prompt 2: greedy malformed; samples correct 4, distinct {ok3, ok4, ok5} = 3
	// greedy acc 1/3; greedy reward (1 + 0.1 + 0)/3; pass@4 2/3; mean@4 7/12;
	// coverage 5/3; well formed 11/12; entropy 0.5 per token;
	// mean length (3+4+3+3 + 3+3+0+3 + 3+3+3+3)/12 = 34/12.
	greedy := []string{"ok0", "bad", ""}
	samples := [][]string{
		{"ok1", "ok 1", "ok2", "bad"},
		{"bad", "bad", "", "bad"},
		{"ok3", "ok4", "ok5", "ok3"},
	}
	s := newScriptSampler(okTask{}, 7, greedy, samples)
	got, err := Run(context.Background(), s, okTask{}, Options{N: 3, K: 4, Temperature: 1, Seed: 7, BatchSize: 2})
	if err != nil {
		t.Fatal(err)
	}
	want := Result{Task: "ok", N: 3, K: 4, Temperature: 1, Seed: 7,
		GreedyAccuracy: 1.0 / 3, GreedyReward: 1.1 / 3, PassAtK: 2.0 / 3, MeanAtK: 7.0 / 12,
		Coverage: 5.0 / 3, WellFormed: 11.0 / 12, EntropyPerToken: 0.5, MeanLength: 34.0 / 12}
	if !closeResult(got, want) {
		t.Errorf("Run =\n%+v\nwant\n%+v", got, want)
	}
	// two chunks (batch 2) for greedy and two for samples, all seeds distinct
	if s.calls != 4 || len(distinctSeeds(s.seeds)) != 4 {
		t.Errorf("sampler calls %d with seeds %v, want 4 distinct", s.calls, s.seeds)
	}
}

func closeResult(a, b Result) bool {
	near := func(x, y float64) bool { return math.Abs(x-y) < 1e-12 }
	return a.Task == b.Task && a.N == b.N && a.K == b.K && a.Temperature == b.Temperature && a.Seed == b.Seed &&
		near(a.GreedyAccuracy, b.GreedyAccuracy) && near(a.GreedyReward, b.GreedyReward) &&
		near(a.PassAtK, b.PassAtK) && near(a.MeanAtK, b.MeanAtK) && near(a.Coverage, b.Coverage) &&
		near(a.WellFormed, b.WellFormed) && near(a.EntropyPerToken, b.EntropyPerToken) && near(a.MeanLength, b.MeanLength)
}

func distinctSeeds(seeds []uint64) map[uint64]bool {
	m := map[uint64]bool{}
	for _, s := range seeds {
		m[s] = true
	}
	return m
}

func TestRunDeterministic(t *testing.T) {
	greedy := []string{"ok", "x", "ok", "x", "ok"}
	samples := [][]string{{"ok", "x"}, {"x", "x"}, {"ok", "ok"}, {"x", "ok"}, {"", ""}}
	var seeds [][]uint64
	for range 2 {
		s := newScriptSampler(okTask{}, 3, greedy, samples)
		if _, err := Run(context.Background(), s, okTask{}, Options{N: 5, K: 2, Temperature: 0.7, Seed: 3}); err != nil {
			t.Fatal(err)
		}
		seeds = append(seeds, s.seeds)
	}
	if fmt.Sprint(seeds[0]) != fmt.Sprint(seeds[1]) {
		t.Errorf("sampler seeds differ between identical runs: %v vs %v", seeds[0], seeds[1])
	}
}

func TestProblemsStream(t *testing.T) {
	task, err := tasks.New("addition", tasks.Options{})
	if err != nil {
		t.Fatal(err)
	}
	a, b := Problems(task, 20, 1), Problems(task, 20, 1)
	if fmt.Sprint(a) != fmt.Sprint(b) {
		t.Error("Problems not deterministic for a seed")
	}
	if fmt.Sprint(a) == fmt.Sprint(Problems(task, 20, 2)) {
		t.Error("seeds 1 and 2 give the same problems")
	}
	// Not the training stream rand.NewPCG(seed, ·) replayed.
	train := tasks.Batch(task, rand.New(rand.NewPCG(1, 0)), 20)
	if fmt.Sprint(a) == fmt.Sprint(train) {
		t.Error("evaluation problems equal the PCG(seed, 0) stream")
	}
}

// TestProblemsOfDataSetDistinct: a data set of 64 held-out rows gives
// distinct rows, all 64 when 256 are asked for (it drew 256 with
// replacement and the run said "on 256 held-out problems"), in an order
// fixed by the seed; Run's N says how many it measured.
func TestProblemsOfDataSetDistinct(t *testing.T) {
	verifier, err := tasks.New("addition", tasks.Options{})
	if err != nil {
		t.Fatal(err)
	}
	rows := make([]tasks.Problem, 64)
	for i := range rows {
		rows[i] = tasks.Problem{Prompt: fmt.Sprintf("%d+1=", i), Answer: fmt.Sprint(i + 1)}
	}
	ds, err := tasks.NewDataset(rows, verifier)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ n, want int }{{256, 64}, {64, 64}, {10, 10}, {1, 1}} {
		got := Problems(ds, tc.n, 7)
		seen := map[string]bool{}
		for _, p := range got {
			seen[p.Prompt] = true
		}
		if len(got) != tc.want || len(seen) != tc.want {
			t.Errorf("Problems(64 rows, %d): %d problems, %d distinct; want %d", tc.n, len(got), len(seen), tc.want)
		}
		if fmt.Sprint(got) != fmt.Sprint(Problems(ds, tc.n, 7)) {
			t.Errorf("Problems(64 rows, %d) differs for the same seed", tc.n)
		}
	}
	if fmt.Sprint(Problems(ds, 10, 7)) == fmt.Sprint(Problems(ds, 10, 8)) {
		t.Error("seeds 7 and 8 give the same rows")
	}
	res, err := Run(context.Background(), newScriptSampler(ds, 7, make([]string, 64), nil), ds, Options{N: 256, GreedyOnly: true, Seed: 7})
	if err != nil || res.N != 64 {
		t.Errorf("Run on 64 rows with N 256: N = %d, err %v; want 64", res.N, err)
	}
}

func TestPassAtK(t *testing.T) {
	tests := []struct {
		n, c, k int
		want    float64
	}{
		{4, 0, 4, 0},
		{4, 1, 4, 1},
		{4, 4, 4, 1},
		{10, 3, 1, 0.3},         // pass@1 = c/n
		{10, 3, 2, 1 - 21.0/45}, // 1 − C(7,2)/C(10,2)
		{5, 2, 3, 1 - 1.0/10},   // 1 − C(3,3)/C(5,3)
		{8, 1, 4, 0.5},          // 1 − C(7,4)/C(8,4) = 1 − 35/70
		{20, 0, 5, 0},
	}
	for _, tc := range tests {
		if got := PassAtK(tc.n, tc.c, tc.k); math.Abs(got-tc.want) > 1e-12 {
			t.Errorf("PassAtK(%d, %d, %d) = %v, want %v", tc.n, tc.c, tc.k, got, tc.want)
		}
	}
}

func TestPassAtKPanicsOnMisuse(t *testing.T) {
	for _, a := range [][3]int{{4, 5, 1}, {4, -1, 1}, {4, 1, 0}, {4, 1, 5}} {
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("PassAtK%v did not panic", a)
				}
			}()
			PassAtK(a[0], a[1], a[2])
		}()
	}
}

func TestRunBadOptions(t *testing.T) {
	s := newScriptSampler(okTask{}, 1, []string{"ok"}, [][]string{{"ok"}})
	for _, o := range []Options{
		{N: 0, K: 1, Temperature: 1},
		{N: 1, K: 0, Temperature: 1},
		{N: 1, K: 1, Temperature: 0},
		{N: 1, K: 1, Temperature: math.NaN()},
		{N: 1, K: 1, Temperature: math.Inf(1)},
		{N: 1, K: 1, Temperature: 1, BatchSize: -1},
	} {
		if _, err := Run(context.Background(), s, okTask{}, o); !errors.Is(err, ErrOptions) {
			t.Errorf("Run(%+v): err = %v, want ErrOptions", o, err)
		}
	}
}

// shortSampler returns one completion too few.
type shortSampler struct{}

func (shortSampler) Sample(_ context.Context, prompts []string, n int, _ float64, _ uint64) ([]Completion, error) {
	return make([]Completion, len(prompts)*n-1), nil
}

func TestRunBadSampler(t *testing.T) {
	if _, err := Run(context.Background(), shortSampler{}, okTask{}, Options{N: 2, K: 2, Temperature: 1}); !errors.Is(err, ErrSampler) {
		t.Errorf("short sampler: err = %v, want ErrSampler", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	s := newScriptSampler(okTask{}, 1, []string{"ok"}, [][]string{{"ok"}})
	if _, err := Run(ctx, s, okTask{}, Options{N: 1, K: 1, Temperature: 1}); !errors.Is(err, context.Canceled) {
		t.Errorf("cancelled: err = %v, want context.Canceled", err)
	}
}

func TestScoreRealTaskCoverage(t *testing.T) {
	// countdown: "3*7+9" and "(3*7)+9" are one answer after Canonical,
	// "9+3*7" another; "3+7+9" is wrong (19).
	task, err := tasks.New("countdown", tasks.Options{})
	if err != nil {
		t.Fatal(err)
	}
	p := tasks.Problem{Prompt: "nums:3,7,9 target:30 =", Answer: "3,7,9>30"}
	samples := []Completion{{Text: "3*7+9"}, {Text: "(3*7)+9"}, {Text: "9+3*7"}, {Text: "3+7+9"}}
	res, err := Score(task, []tasks.Problem{p}, []Completion{{Text: "3+7+9"}}, samples, 4)
	if err != nil {
		t.Fatal(err)
	}
	if res.Coverage != 2 || res.MeanAtK != 0.75 || res.PassAtK != 1 || res.GreedyAccuracy != 0 || res.WellFormed != 1 {
		t.Errorf("Score = %+v, want coverage 2, mean@4 0.75, pass@4 1, greedy 0", res)
	}
}

func TestRunGreedyOnly(t *testing.T) {
	greedy := []string{"ok", "bad", "", "ok"}
	s := newScriptSampler(okTask{}, 2, greedy, nil)
	got, err := Run(context.Background(), s, okTask{}, Options{N: 4, Seed: 2, GreedyOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	// 2 of 4 correct; reward (1 + 0.1 + 0 + 1)/4; one sampler call; no sample metrics.
	want := Result{Task: "ok", N: 4, Seed: 2, GreedyAccuracy: 0.5, GreedyReward: 2.1 / 4}
	if !closeResult(got, want) || s.calls != 1 {
		t.Errorf("Run greedy only = %+v with %d calls, want %+v with 1", got, s.calls, want)
	}
}

// panicTask is okTask whose verifier panics on "boom".
type panicTask struct{ okTask }

func (panicTask) Verify(completion, answer string) tasks.Verdict {
	if completion == "boom" {
		panic("verifier bug")
	}
	return okTask{}.Verify(completion, answer)
}

// TestRunSurvivesVerifierPanic: evaluation verifies under the same guard as
// training (tasks.VerifyWithin), so a verifier that panics on one
// completion scores it as not correct instead of ending the evaluation.
func TestRunSurvivesVerifierPanic(t *testing.T) {
	s := newScriptSampler(panicTask{}, 3, []string{"boom", "ok"}, [][]string{{"ok", "boom"}, {"boom", "bad"}})
	got, err := Run(context.Background(), s, panicTask{}, Options{N: 2, K: 2, Temperature: 1, Seed: 3, BatchSize: 2})
	if err != nil {
		t.Fatal(err)
	}
	if got.GreedyAccuracy != 0.5 || got.MeanAtK != 0.25 || got.PassAtK != 0.5 {
		t.Errorf("greedy %v, mean@2 %v, pass@2 %v; want 0.5, 0.25, 0.5", got.GreedyAccuracy, got.MeanAtK, got.PassAtK)
	}
}
