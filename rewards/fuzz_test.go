package rewards

import (
	"encoding/binary"
	"math"
	"testing"
)

// FuzzPrepare feeds arbitrary utilities (any float64 bit pattern, so NaN and
// ±Inf too), group sizes, tau and beta through Prepare for every objective:
// it must return an error or finite results, never panic.
func FuzzPrepare(f *testing.F) {
	f.Add(uint8(2), 0.5, 0.1, []byte{0, 0, 0, 0, 0, 0, 240, 63, 0, 0, 0, 0, 0, 0, 0, 0})
	f.Add(uint8(1), 1.0, 0.0, []byte{1, 0, 0, 0, 0, 0, 248, 127})
	f.Add(uint8(0), 0.0, -1.0, []byte{})
	f.Add(uint8(3), 1e-300, 1e300, []byte{0, 0, 0, 0, 0, 0, 240, 127, 0, 0, 0, 0, 0, 0, 240, 255, 9, 9, 9, 9, 9, 9, 9, 9})
	f.Fuzz(func(t *testing.T, k uint8, tau, beta float64, raw []byte) {
		n := len(raw) / 8
		in := PrepareInput{K: int(k % 6), Rewards: [][]float64{make([]float64, n)}, TokenCounts: make([]int, n),
			RefLogpSums: make([]float64, n), EntropySums: make([]float64, n)}
		for i := range n {
			v := math.Float64frombits(binary.LittleEndian.Uint64(raw[8*i:]))
			in.Rewards[0][i] = v
			in.TokenCounts[i] = int(raw[8*i]) - 10
			in.RefLogpSums[i] = -math.Abs(v)
			in.EntropySums[i] = float64(raw[8*i+1])
		}
		for _, obj := range []Objective{ObjectiveGRPO, ObjectiveGRPOEntropyBonus, ObjectiveMaxEntEntropy, ObjectiveMaxEntListwise} {
			cfg := DefaultPrepareConfig()
			cfg.Objective, cfg.EntropyBonusCoef, cfg.SkipZeroVarianceGroups = obj, 0.1, true
			out, err := Prepare(in, cfg, tau, beta)
			if err != nil {
				continue
			}
			for name, x := range map[string][]float64{"u": out.Utilities, "a": out.Advantages, "q": out.Q, "w": out.Weights} {
				for i, v := range x {
					if !isFinite(v) {
						t.Fatalf("%s: %s[%d] = %v (k=%d tau=%v beta=%v)", obj, name, i, v, in.K, tau, beta)
					}
				}
			}
			for key, v := range (StepMetrics{Prepared: &out.Stats}).Flatten() {
				if !isFinite(v) {
					t.Fatalf("%s: metric %s = %v", obj, key, v)
				}
			}
		}
	})
}
