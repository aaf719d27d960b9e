package rewards

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
)

// batch builds a seeded P×K batch with two reward functions.
func batch(p, k int, seed uint64) PrepareInput {
	r := rand.New(rand.NewPCG(seed, seed))
	n := p * k
	in := PrepareInput{K: k, Rewards: [][]float64{make([]float64, n), make([]float64, n)},
		Truncated: make([]bool, n), TokenCounts: make([]int, n), RefLogpSums: make([]float64, n),
		Completions: make([]string, n), BehaviorLogpSums: make([]float64, n), EntropySums: make([]float64, n)}
	for i := range n {
		in.Rewards[0][i] = float64(r.IntN(2))
		in.Rewards[1][i] = 0.1 * float64(r.IntN(2))
		in.TokenCounts[i] = 1 + r.IntN(64)
		in.Truncated[i] = in.TokenCounts[i] == 64
		in.RefLogpSums[i] = -r.Float64() * float64(in.TokenCounts[i])
		in.BehaviorLogpSums[i] = -r.Float64() * float64(in.TokenCounts[i])
		in.EntropySums[i] = r.Float64() * float64(in.TokenCounts[i])
		in.Completions[i] = fmt.Sprintf(`so \boxed{%d}`, r.IntN(3))
	}
	return in
}

func listwiseConfig() PrepareConfig {
	cfg := DefaultPrepareConfig()
	cfg.Objective = ObjectiveMaxEntListwise
	cfg.RewardWeights = []float64{1, 1}
	return cfg
}

func TestPrepareListwise(t *testing.T) {
	in := batch(4, 8, 1)
	cfg := listwiseConfig()
	cfg.QTemperature = 2
	out, err := Prepare(in, cfg, 0.5, 0.08)
	if err != nil {
		t.Fatal(err)
	}
	// Prepare is exactly the composition of the exported sub-steps.
	u, _ := Utilities(in.Rewards, cfg.RewardWeights)
	a, _ := GroupAdvantages(u, 8, true)
	q, _ := QDistribution(u, 8, 2, 1e-6)
	ref, _ := ReferenceSequenceLogp(in.RefLogpSums, in.TokenCounts, true)
	w, _ := ListwiseWeights(q, ref, in.TokenCounts, 8, 0.5, 0.08, WeightOptions{})
	for _, c := range []struct {
		name      string
		got, want []float64
	}{{"utilities", out.Utilities, u}, {"advantages", out.Advantages, a}, {"q", out.Q, q}, {"ref", out.RefLogp, ref}, {"weights", out.Weights, w}} {
		if !nearSlice(c.got, c.want, 0) {
			t.Errorf("%s = %v, want %v", c.name, c.got, c.want)
		}
	}
	if out.Prompts != 4 || out.K != 8 || len(out.Active) != 4 || !out.Stats.HasWeights || out.Stats.WeightDenominator != 0.5 {
		t.Errorf("shape/stats: %+v", out.Stats)
	}
	mean, std := Moments(u)
	if out.Stats.Reward.Mean != mean || out.Stats.Reward.Std != std || len(out.Stats.PerFunction) != 2 || out.Stats.RewardNames[1] != "reward_1" {
		t.Errorf("reward stats = %+v", out.Stats)
	}
	// inputs are not modified.
	if fresh := batch(4, 8, 1); !nearSlice(in.Rewards[0], fresh.Rewards[0], 0) || !nearSlice(in.RefLogpSums, fresh.RefLogpSums, 0) {
		t.Errorf("Prepare modified its input")
	}
}

func TestPrepareObjectives(t *testing.T) {
	in := batch(3, 4, 2)
	// GRPO: no weights; SEED scales advantages.
	cfg := DefaultPrepareConfig()
	cfg.Objective = ObjectiveGRPO
	cfg.Seed.Enabled = true
	out, err := Prepare(in, cfg, 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	if out.Weights != nil || out.Stats.HasWeights || out.Stats.Seed == nil {
		t.Errorf("grpo+seed: weights %v seed %v", out.Weights, out.Stats.Seed)
	}
	plain, _ := GroupAdvantages(out.Utilities, 4, true)
	scaled, _ := ScaleGroups(plain, 4, out.Stats.Seed.Scale)
	if !nearSlice(out.Advantages, scaled, 0) {
		t.Errorf("seed-scaled advantages = %v, want %v", out.Advantages, scaled)
	}
	// grpo_entropy_bonus really adds the bonus (DESIGN §3).
	cfg = DefaultPrepareConfig()
	cfg.Objective, cfg.EntropyBonusCoef = ObjectiveGRPOEntropyBonus, 0.3
	out, err = Prepare(in, cfg, 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	base, _ := Utilities(in.Rewards, nil)
	bonus, _ := PolicyEntropyBonus(base, in.EntropySums, in.TokenCounts, 4, 0.3)
	for i := range base {
		if !near(out.Utilities[i], base[i]+bonus.Bonus[i], 1e-15) {
			t.Fatalf("utility %d = %v, want %v + %v", i, out.Utilities[i], base[i], bonus.Bonus[i])
		}
	}
	if out.Stats.Bonus == nil || out.Stats.BaseReward != meanFinite(base) {
		t.Errorf("bonus stats missing")
	}
	// zero_truncated_completion_rewards.
	cfg = DefaultPrepareConfig()
	cfg.ZeroTruncated = true
	in.Truncated[0], in.Rewards[0][0] = true, 1
	if out, _ = Prepare(in, cfg, 0, 0); out.Utilities[0] != 0 {
		t.Errorf("truncated utility = %v, want 0", out.Utilities[0])
	}
	errCases := []struct {
		name string
		cfg  func(*PrepareConfig)
		tau  float64
		want error
	}{
		// spec §1.8: listwise MaxEnt requires tau > 0.
		{"listwise tau 0", func(c *PrepareConfig) { c.Objective = ObjectiveMaxEntListwise }, 0, ErrParam},
		// spec §0: SEED only with a GRPO objective.
		{"seed with maxent", func(c *PrepareConfig) { c.Seed.Enabled = true }, 1, ErrParam},
		// spec §1.6: grpo_entropy_bonus requires c > 0.
		{"bonus coef 0", func(c *PrepareConfig) { c.Objective = ObjectiveGRPOEntropyBonus }, 1, ErrParam},
		{"q temperature 0", func(c *PrepareConfig) { c.QTemperature = 0 }, 1, ErrParam},
	}
	for _, tc := range errCases {
		cfg := DefaultPrepareConfig()
		tc.cfg(&cfg)
		if _, err := Prepare(in, cfg, tc.tau, 0); !errors.Is(err, tc.want) {
			t.Errorf("%s: err = %v, want %v", tc.name, err, tc.want)
		}
	}
}

func TestPrepareNeutralGroupsAndFallback(t *testing.T) {
	// group 0 all-equal rewards, group 1 varied.
	in := PrepareInput{K: 2, Rewards: [][]float64{{1, 1, 1, 0}}, TokenCounts: []int{3, 3, 3, 3},
		RefLogpSums: []float64{-1, -9, -1, -1}}
	cfg := listwiseConfig()
	cfg.RewardWeights = nil
	out, err := Prepare(in, cfg, 0.5, 1)
	if err != nil {
		t.Fatal(err)
	}
	// without skipping, the reference tilt still moves the neutral group, and
	// no group counts as neutral: the original reports listwise_neutral_group_frac
	// 0 (active 1) unless zero-variance groups are skipped.
	if !out.Active[0] || out.Weights[0] <= 0.5 || !out.ZeroStd[0] || out.ZeroStd[1] || out.Stats.FracZeroStd != 0.5 {
		t.Errorf("no skip: active %v weights %v zero-std %v", out.Active, out.Weights, out.ZeroStd)
	}
	if m := (StepMetrics{Prepared: &out.Stats}).Flatten(); m["train/maxent/listwise_neutral_group_frac"] != 0 || m["train/maxent/listwise_active_group_frac"] != 1 {
		t.Errorf("no skip: neutral frac %v active frac %v, want 0 and 1", m["train/maxent/listwise_neutral_group_frac"], m["train/maxent/listwise_active_group_frac"])
	}
	cfg.SkipZeroVarianceGroups = true
	out, _ = Prepare(in, cfg, 0.5, 1)
	if out.Active[0] || !out.Active[1] || !nearSlice(out.Weights[:2], []float64{0.5, 0.5}, 0) || out.Stats.NeutralGroupFrac != 0.5 {
		t.Errorf("skip: active %v weights %v", out.Active, out.Weights)
	}
	// a non-finite reference sum fails, or falls back to uniform when allowed.
	in.RefLogpSums[3] = math.NaN()
	cfg.SkipZeroVarianceGroups = false
	if _, err := Prepare(in, cfg, 0.5, 1); !errors.Is(err, ErrNonFinite) {
		t.Errorf("NaN ref: err = %v, want ErrNonFinite", err)
	}
	cfg.AllowEmptyWeightFallback = true
	out, err = Prepare(in, cfg, 0.5, 1)
	if err != nil || !out.Stats.WeightFallback || !nearSlice(out.Weights, []float64{0.5, 0.5, 0.5, 0.5}, 0) {
		t.Errorf("fallback: %v, %v", out, err)
	}
}

// TestPrepareRobust: no panic and no NaN on empty groups, NaN/Inf rewards,
// K = 1 and all-equal rewards; errors are sentinels.
func TestPrepareRobust(t *testing.T) {
	nan, inf := math.NaN(), math.Inf(1)
	tests := []struct {
		name string
		in   PrepareInput
		err  error
	}{
		{name: "no completions", in: PrepareInput{K: 4, Rewards: [][]float64{{}}}, err: ErrEmptyBatch},
		{name: "no reward functions", in: PrepareInput{K: 4}, err: ErrEmptyBatch},
		{name: "K=0", in: PrepareInput{K: 0, Rewards: [][]float64{{1}}, TokenCounts: []int{1}}, err: ErrEmptyGroup},
		{name: "ragged groups", in: PrepareInput{K: 2, Rewards: [][]float64{{1, 2, 3}}, TokenCounts: []int{1, 1, 1}}, err: ErrShape},
		{name: "token counts", in: PrepareInput{K: 1, Rewards: [][]float64{{1}}}, err: ErrShape},
		{name: "NaN and Inf rewards", in: PrepareInput{K: 2, Rewards: [][]float64{{nan, inf, -inf, 1}}, TokenCounts: []int{1, 2, 3, 4},
			RefLogpSums: []float64{-1, -2, -3, -4}}},
		{name: "K=1", in: PrepareInput{K: 1, Rewards: [][]float64{{0.3, 2}}, TokenCounts: []int{1, 2}, RefLogpSums: []float64{-1, -1}}},
		{name: "all equal", in: PrepareInput{K: 3, Rewards: [][]float64{{1, 1, 1}}, TokenCounts: []int{0, 0, 0}, RefLogpSums: []float64{0, 0, 0}}},
	}
	for _, tc := range tests {
		for _, obj := range []Objective{ObjectiveGRPO, ObjectiveMaxEntEntropy, ObjectiveMaxEntListwise} {
			cfg := DefaultPrepareConfig()
			cfg.Objective = obj
			out, err := Prepare(tc.in, cfg, 0.5, 0.1)
			if !errors.Is(err, tc.err) {
				t.Errorf("%s/%s: err = %v, want %v", tc.name, obj, err, tc.err)
				continue
			}
			if err != nil {
				continue
			}
			for name, x := range map[string][]float64{"utilities": out.Utilities, "advantages": out.Advantages, "q": out.Q, "weights": out.Weights} {
				assertNoNaN(t, tc.name+"/"+string(obj)+"/"+name, x)
			}
			for k, v := range (StepMetrics{Prepared: &out.Stats}).Flatten() {
				if !isFinite(v) {
					t.Errorf("%s/%s: metric %s = %v", tc.name, obj, k, v)
				}
			}
		}
	}
}

func TestPolicyEntropyBonus(t *testing.T) {
	// spec §1.6: h = Hsum/max(T,1); z within group (pop std, floor 1e-6);
	// bonus = c·σ_R·z, σ_R = batch reward std.
	u := []float64{1, 0, 1, 0}
	b, err := PolicyEntropyBonus(u, []float64{4, 2, 3, 3}, []int{2, 2, 0, 1}, 2, 0.5)
	if err != nil {
		t.Fatal(err)
	}
	if !nearSlice(b.PerToken, []float64{2, 1, 3, 3}, 0) || b.Scale != 0.5 {
		t.Errorf("per-token %v scale %v", b.PerToken, b.Scale)
	}
	if !nearSlice(b.ZScore, []float64{1, -1, 0, 0}, 1e-12) || !nearSlice(b.Bonus, []float64{0.25, -0.25, 0, 0}, 1e-12) {
		t.Errorf("z %v bonus %v", b.ZScore, b.Bonus)
	}
	// σ_R = 0 (all-equal rewards) falls back to 1.
	if b, _ := PolicyEntropyBonus([]float64{1, 1}, []float64{1, 3}, []int{1, 1}, 2, 1); b.Scale != 1 || !nearSlice(b.Bonus, []float64{-1, 1}, 1e-12) {
		t.Errorf("sigma fallback: %+v", b)
	}
	if _, err := PolicyEntropyBonus(u, []float64{1, 2, 3, math.NaN()}, []int{1, 1, 1, 1}, 2, 1); !errors.Is(err, ErrNonFinite) {
		t.Errorf("NaN entropy: err = %v", err)
	}
}

func TestParseObjective(t *testing.T) {
	for in, want := range map[string]Objective{"baseline": ObjectiveGRPO, "grpo_native": ObjectiveGRPO,
		"entropy_bonus": ObjectiveGRPOEntropyBonus, "": ObjectiveMaxEntEntropy, "maxent": ObjectiveMaxEntEntropy,
		"tokenwise": ObjectiveMaxEntEntropy, "listwise": ObjectiveMaxEntListwise, "maxent_listwise": ObjectiveMaxEntListwise} {
		if got, err := ParseObjective(in); err != nil || got != want {
			t.Errorf("ParseObjective(%q) = %v, %v; want %v", in, got, err, want)
		}
	}
	if _, err := ParseObjective("ppo"); !errors.Is(err, ErrParam) {
		t.Errorf("unknown objective: err = %v", err)
	}
}

var sinkPrepared *Prepared

// BenchmarkPrepare measures the per-step reward-statistics + weights path at
// 64 prompts × 8 completions.
func BenchmarkPrepare(b *testing.B) {
	in := batch(64, 8, 7)
	for _, tc := range []struct {
		name string
		obj  Objective
		seed bool
	}{{"listwise", ObjectiveMaxEntListwise, false}, {"grpo", ObjectiveGRPO, false}, {"grpo+seed", ObjectiveGRPO, true}} {
		cfg := listwiseConfig()
		cfg.Objective, cfg.Seed.Enabled = tc.obj, tc.seed
		b.Run("P=64,K=8/"+tc.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				out, err := Prepare(in, cfg, 0.5, 0.08)
				if err != nil {
					b.Fatal(err)
				}
				sinkPrepared = out
			}
		})
	}
}

func TestPrepareOverflow(t *testing.T) {
	tests := []struct {
		name    string
		rewards [][]float64
		k       int
		weights []float64
		scale   bool
		errStr  string // "" for success
	}{
		{"equal huge utilities", [][]float64{{huge, huge, 1, 2}}, 2, nil, true, ""},
		{"opposite huge utilities", [][]float64{{huge, -huge, 1, 2}}, 2, nil, true, ""},
		{"opposite huge, unscaled", [][]float64{{huge, -huge, 1, 2}}, 2, nil, false, ""},
		// group mean -1.7e308/4: u_0 - mean = 2.1e308.
		{"advantage beyond float64", [][]float64{{huge, -huge, -huge, 1}}, 4, nil, false,
			"prepare: group advantages: group 0: non-finite advantage from utilities of magnitude 1.7e+308"},
		{"weighted sum overflows", [][]float64{{huge, 0, 1, 2}, {huge, 0, 0, 0}}, 2, []float64{1, 1}, true,
			"prepare: utilities: completion 0: weighted reward sum is +Inf"},
	}
	for _, tt := range tests {
		for _, obj := range []Objective{ObjectiveGRPO, ObjectiveMaxEntEntropy, ObjectiveMaxEntListwise} {
			cfg := DefaultPrepareConfig()
			cfg.Objective, cfg.ScaleRewards, cfg.RewardWeights = obj, tt.scale, tt.weights
			cfg.QTemperature = 0.5 // u/T overflows too
			in := PrepareInput{K: tt.k, Rewards: tt.rewards, TokenCounts: []int{1, 2, 3, 4}, RefLogpSums: []float64{-1, -2, -3, -4}}
			out, err := Prepare(in, cfg, 0.5, 0.1)
			name := tt.name + "/" + string(obj)
			if tt.errStr != "" {
				if !errors.Is(err, ErrNonFinite) || !strings.Contains(err.Error(), tt.errStr) {
					t.Errorf("%s: err = %v, want ErrNonFinite with %q", name, err, tt.errStr)
				}
				continue
			}
			if err != nil {
				t.Errorf("%s: %v", name, err)
				continue
			}
			for field, x := range map[string][]float64{"utilities": out.Utilities, "advantages": out.Advantages, "q": out.Q, "weights": out.Weights} {
				assertNoNaN(t, name+"/"+field, x)
			}
			st := out.Stats
			assertNoNaN(t, name+"/stats", append([]float64{st.Reward.Mean, st.Reward.Std, st.BaseReward, st.QEntropy.Mean,
				st.QEntropy.Std, st.WeightMean, st.WeightStd, st.Weight.Mean}, st.Reward.Quantiles[:]...))
			if tt.rewards[0][1] == huge && (out.Advantages[0] != 0 || out.Advantages[1] != 0 || !out.ZeroStd[0] || out.Q[0] != 0.5) {
				t.Errorf("%s: equal huge group: A %v, zero std %v, q %v; want 0, true, 0.5", name, out.Advantages[:2], out.ZeroStd[0], out.Q[:2])
			}
		}
	}
}

func TestPrepareNonFiniteWeights(t *testing.T) {
	// beta·ref = 10·(-1e308) is -Inf for every completion: softmax NaN.
	in := PrepareInput{K: 2, Rewards: [][]float64{{1, 1, 0, 1}}, TokenCounts: []int{1, 1, 1, 1},
		RefLogpSums: []float64{-1e308, -1e308, -1e308, -1e308}}
	cfg := listwiseConfig()
	cfg.RewardWeights = nil
	if _, err := Prepare(in, cfg, 0.5, 10); !errors.Is(err, ErrNonFinite) || !strings.Contains(err.Error(), "prepare: listwise weights") {
		t.Errorf("err = %v, want ErrNonFinite naming listwise weights", err)
	}
	cfg.AllowEmptyWeightFallback = true
	out, err := Prepare(in, cfg, 0.5, 10)
	if err != nil {
		t.Fatalf("fallback: %v", err)
	}
	if !out.Stats.WeightFallback || !slices.Equal(out.Weights, []float64{0.5, 0.5, 0.5, 0.5}) {
		t.Errorf("fallback: weights %v, want uniform fallback", out.Weights)
	}
}
