package vec

import "testing"

// Per-call costs of the attention kernels on cached data: head width 32,
// 24 keys at the stride of a 4-head cache row (128 floats).
func BenchmarkScores(b *testing.B) {
	q, k, sc := make([]float32, 32), make([]float32, 24*128), make([]float32, 24)
	for b.Loop() {
		Scores(sc, q, k, 128, 0.1)
	}
}

func BenchmarkMix(b *testing.B) {
	o, p, v := make([]float32, 32), make([]float32, 24), make([]float32, 24*128)
	for b.Loop() {
		Mix(o, p, v, 128)
	}
}

func BenchmarkExpShift(b *testing.B) {
	z := make([]float32, 384)
	for b.Loop() {
		ExpShift(z, z, 0, 1)
	}
}
