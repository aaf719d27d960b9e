package tasks

import (
	"errors"
	"math"
	"math/rand/v2"
	"reflect"
	"runtime"
	"strings"
	"testing"
	"time"
)

func TestRewardValues(t *testing.T) {
	cd := mustTask(t, "countdown", Options{})
	completions := []string{"7*3+9", "7*3-9", "7*3+", "(3+7)*3"}
	answers := []string{"3,7,9>30", "3,7,9>30", "3,7,9>30", "3,7,9>30"}
	// Verdicts: correct, wrong, malformed, wrong (3 used twice).
	cases := []struct {
		name string
		want []float64
	}{
		{"accuracy", []float64{1, 0.1, 0, 0.1}}, // the issue: 1 / 0.1 / 0
		{"pure_accuracy", []float64{1, 0.1, 0, 0.1}},
		{"correct", []float64{1, 0, 0, 0}},
		{"format", []float64{1, 1, 0, 1}},
		// Lengths 5, 5, 4, 7: λ = 0.5 − (L−4)/3 = 1/6, 1/6, 1/2, −1/2;
		// correct keeps λ, the others min(0, λ).
		{"length", []float64{1.0 / 6, 0, 0, -0.5}},
	}
	for _, tc := range cases {
		fn, err := Reward(tc.name, cd, 0)
		if err != nil {
			t.Fatalf("Reward(%q): %v", tc.name, err)
		}
		got := fn(completions, answers)
		if !closeAll(got, tc.want, 1e-15) {
			t.Errorf("%s = %v, want %v", tc.name, got, tc.want)
		}
	}
}

func TestRewardDoesNotModifyInputs(t *testing.T) {
	add := mustTask(t, "addition", Options{})
	c, a := []string{"2", "3"}, []string{"2", "2"}
	c0, a0 := append([]string(nil), c...), append([]string(nil), a...)
	for _, name := range []string{"accuracy", "correct", "format", "length"} {
		fn, _ := Reward(name, add, 0)
		fn(c, a)
		if !reflect.DeepEqual(c, c0) || !reflect.DeepEqual(a, a0) {
			t.Fatalf("%s modified its inputs", name)
		}
	}
}

func TestLengthPenalty(t *testing.T) {
	// Open-R1 len_reward: equal lengths give all zeros; an empty call an
	// empty result.
	vs := []Verdict{Correct, Wrong}
	if got := lengthPenalty([]string{"ab", "cd"}, vs); !closeAll(got, []float64{0, 0}, 0) {
		t.Errorf("equal lengths: %v", got)
	}
	if got := lengthPenalty(nil, nil); len(got) != 0 {
		t.Errorf("empty: %v", got)
	}
	// Lengths 1 and 3: λ = 0.5, −0.5. Correct short 0.5, wrong long −0.5;
	// characters, not bytes: "é" is one.
	if got := lengthPenalty([]string{"é", "abc"}, vs); !closeAll(got, []float64{0.5, -0.5}, 0) {
		t.Errorf("lengths 1, 3: %v", got)
	}
	// A timed-out completion scores 0 whatever its length.
	if got := lengthPenalty([]string{"é", "abc"}, []Verdict{TimedOut, TimedOut}); !closeAll(got, []float64{0, 0}, 0) {
		t.Errorf("timed out: %v", got)
	}
}

func TestRewardRegistry(t *testing.T) {
	add := mustTask(t, "addition", Options{})
	for _, alias := range []string{"accuracy_reward", "pure_accuracy_math", "binary", "binary_accuracy", "format_reward", "len", "len_reward", "length_penalty", " FORMAT "} {
		if _, err := Reward(alias, add, 0); err != nil {
			t.Errorf("Reward(%q): %v", alias, err)
		}
	}
	_, err := Reward("cosine", add, 0)
	want := `tasks: unknown reward function "cosine" (known: accuracy (aliases: accuracy_reward, pure_accuracy, pure_accuracy_math), correct (aliases: binary, binary_accuracy), format (aliases: format_reward), length (aliases: len, len_reward, length_penalty))`
	if !errors.Is(err, ErrUnknownReward) || err.Error() != want {
		t.Errorf("error = %v\nwant    %s", err, want)
	}
	if _, err := Reward("accuracy", add, -time.Second); !errors.Is(err, ErrBadTimeout) {
		t.Errorf("negative timeout: error = %v, want ErrBadTimeout", err)
	}
}

func TestRewards(t *testing.T) {
	add := mustTask(t, "addition", Options{})
	ws, err := Rewards([]string{"pure_accuracy", "format"}, nil, add, 0)
	if err != nil || len(ws) != 2 || ws[0].Name != "accuracy" || ws[0].Weight != 1 || ws[1].Name != "format" || ws[1].Weight != 1 {
		t.Fatalf("Rewards(nil weights) = %+v, %v", ws, err)
	}
	ws, err = Rewards([]string{"accuracy", "length"}, []float64{1, -0.5}, add, time.Minute)
	if err != nil || ws[1].Weight != -0.5 {
		t.Fatalf("Rewards = %+v, %v", ws, err)
	}
	if got := ws[0].Fn([]string{"2"}, []string{"2"}); got[0] != 1 {
		t.Errorf("weighted accuracy fn = %v", got)
	}
	bad := []struct {
		names   []string
		weights []float64
		want    error
	}{
		{nil, nil, ErrBadWeights},
		{[]string{"accuracy"}, []float64{1, 2}, ErrBadWeights},
		{[]string{"accuracy", "format"}, []float64{1}, ErrBadWeights},
		{[]string{"accuracy"}, []float64{math.NaN()}, ErrBadWeights},
		{[]string{"accuracy"}, []float64{math.Inf(-1)}, ErrBadWeights},
		{[]string{"accuracy", "cosine"}, nil, ErrUnknownReward},
	}
	for _, tc := range bad {
		if _, err := Rewards(tc.names, tc.weights, add, 0); !errors.Is(err, tc.want) {
			t.Errorf("Rewards(%v, %v) error = %v, want %v", tc.names, tc.weights, err, tc.want)
		}
	}
}

func TestRewardLengthMismatchPanics(t *testing.T) {
	fn, _ := Reward("accuracy", mustTask(t, "addition", Options{}), 0)
	defer func() {
		if r := recover(); r == nil || !strings.Contains(r.(string), "2 completions, 1 answers") {
			t.Errorf("recover() = %v, want a length panic", r)
		}
	}()
	fn([]string{"1", "2"}, []string{"1"})
}

// slowTask is addition whose Verify blocks on "slow" completions until
// release is closed: a verifier that runs too long, without a clock.
type slowTask struct {
	Task
	release chan struct{}
}

func (s slowTask) Verify(completion, answer string) Verdict {
	if completion == "slow" {
		<-s.release
	}
	return s.Task.Verify(completion, answer)
}

func TestVerifierTimeoutScoresZero(t *testing.T) {
	slow := slowTask{Task: mustTask(t, "addition", Options{}), release: make(chan struct{})}
	defer close(slow.release) // let the stuck verifier goroutine finish
	for _, tc := range []struct {
		name string
		want []float64
	}{
		{"accuracy", []float64{1, 0, 0.1}},
		{"format", []float64{1, 0, 1}},
		{"correct", []float64{1, 0, 0}},
		// Lengths 1, 4, 1: λ = 0.5, −0.5, 0.5; the slow one scores 0.
		{"length", []float64{0.5, 0, 0}},
	} {
		// The timeout leaves a fast verifier ample time on a loaded machine
		// (at 1 ms, "2" itself timed out under load); the slow one never ends.
		fn, err := Reward(tc.name, slow, 500*time.Millisecond)
		if err != nil {
			t.Fatal(err)
		}
		// If the call waited for the verifier it would never return: the
		// verifier is only released when the test ends.
		got := fn([]string{"2", "slow", "3"}, []string{"2", "2", "2"})
		if !closeAll(got, tc.want, 0) {
			t.Errorf("%s = %v, want %v", tc.name, got, tc.want)
		}
	}
	if v := VerifyWithin(slow, "slow", "2", time.Millisecond); v != TimedOut {
		t.Errorf("VerifyWithin = %v, want timed_out", v)
	}
}

// panicTask's verifier panics; VerifyWithin must contain it.
type panicTask struct{ Task }

func (panicTask) Verify(string, string) Verdict { panic("verifier bug") }

func TestVerifierPanicIsMalformed(t *testing.T) {
	p := panicTask{mustTask(t, "addition", Options{})}
	if v := VerifyWithin(p, "2", "2", time.Minute); v != Malformed {
		t.Errorf("VerifyWithin(panicking verifier) = %v, want malformed", v)
	}
}

func TestRewardsWithDataset(t *testing.T) {
	// Reward functions work on any Task, here a dataset served with the
	// word-problem verifier.
	d, err := NewDataset([]Problem{{"two apples and four?", "6"}}, mustTask(t, "words", Options{}))
	if err != nil {
		t.Fatal(err)
	}
	fn, _ := Reward("accuracy", d, 0)
	p := d.Generate(rand.New(rand.NewPCG(1, 1)))
	if got := fn([]string{"#### 6", "#### 5", "6"}, []string{p.Answer, p.Answer, p.Answer}); !closeAll(got, []float64{1, 0.1, 0}, 0) {
		t.Errorf("accuracy = %v, want [1 0.1 0]", got)
	}
}

func closeAll(got, want []float64, tol float64) bool {
	if len(got) != len(want) {
		return false
	}
	for i := range got {
		if math.Abs(got[i]-want[i]) > tol {
			return false
		}
	}
	return true
}

func TestVerifyAll(t *testing.T) {
	cd := mustTask(t, "countdown", Options{})
	completions := []string{"7*3+9", "(7*3)+9", " 7 * 3 + 9", "3*7+9", "9+3*7", "7*3-9", "junk"}
	answers := make([]string, len(completions))
	for i := range answers {
		answers[i] = "3,7,9>30"
	}
	vs := VerifyAll(cd, completions, answers, 0)
	want := []Verdict{Correct, Correct, Correct, Correct, Correct, Wrong, Malformed}
	if !reflect.DeepEqual(vs, want) {
		t.Fatalf("VerifyAll = %v, want %v", vs, want)
	}
}

func TestVerifyWithinLeavesNoGoroutines(t *testing.T) {
	// Each verifier goroutine ends once its verdict is sent; wait (with a
	// deadline that only marks failure) for the count to come back down.
	before := runtime.NumGoroutine()
	fn, _ := Reward("accuracy", mustTask(t, "countdown", Options{}), 0)
	c, a := make([]string, 1000), make([]string, 1000)
	for i := range c {
		c[i], a[i] = "7*3+9", "3,7,9>30"
	}
	fn(c, a)
	deadline := time.Now().Add(10 * time.Second)
	for runtime.NumGoroutine() > before {
		if time.Now().After(deadline) {
			t.Fatalf("%d goroutines before, %d after", before, runtime.NumGoroutine())
		}
		runtime.Gosched()
	}
}
