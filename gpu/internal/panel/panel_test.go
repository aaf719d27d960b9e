package panel

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"golang.org/x/sys/cpu"
)

// eachWidth calls f once per kernel this CPU has (AVX2, and AVX-512
// where present) with the panel width set to its width.
func eachWidth(tb testing.TB, f func(w int)) {
	if !Available() {
		tb.Skip("no kernel on this build: the model uses its BLAS")
	}
	defer func(w int) { width = w }(width)
	ws := []int{16}
	if kernelWidth(cpu.X86.HasAVX512F) == 32 {
		ws = append(ws, 32)
	}
	for _, w := range ws {
		width = w
		f(w)
	}
}

// widths runs the test f once per kernel (eachWidth).
func widths(t *testing.T, f func(t *testing.T)) {
	eachWidth(t, func(w int) { t.Run(fmt.Sprintf("width=%d", w), f) })
}

func randMat(rng *rand.Rand, n int) []float32 {
	m := make([]float32, n)
	for i := range m {
		m[i] = rng.Float32()*2 - 1
	}
	return m
}

// TestMul checks a·B against the float64 product, on shapes with edge tiles
// on both sides (rows not a multiple of 6, columns not of 16), both
// packings, with and without accumulation, and that nothing past c's m
// rows is written.
func TestMul(t *testing.T) { widths(t, testMul) }

func testMul(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for _, s := range [][3]int{{1, 1, 1}, {6, 8, 16}, {7, 3, 17}, {13, 32, 98}, {64, 128, 384}, {5, 129, 33}, {12, 0, 20}} {
		m, k, n := s[0], s[1], s[2]
		for _, trans := range []bool{false, true} {
			for _, acc := range []bool{false, true} {
				t.Run(fmt.Sprintf("%dx%dx%d/trans=%v/acc=%v", m, k, n, trans, acc), func(t *testing.T) {
					a, bm, c0 := randMat(rng, m*k), randMat(rng, k*n), randMat(rng, m*n+5)
					b := New(k, n)
					if trans { // bm holds Bᵀ, [n, k]
						b.SetT(bm)
					} else {
						b.Set(bm)
					}
					c := append([]float32(nil), c0...)
					b.Mul(c, a, m, acc)
					for i := 0; i < m; i++ {
						for j := 0; j < n; j++ {
							var want float64
							if acc {
								want = float64(c0[i*n+j])
							}
							for l := 0; l < k; l++ {
								bv := bm[l*n+j]
								if trans {
									bv = bm[j*k+l]
								}
								want += float64(a[i*k+l]) * float64(bv)
							}
							if d := math.Abs(float64(c[i*n+j]) - want); d > 1e-5*(1+math.Abs(want)) {
								t.Fatalf("c[%d][%d] = %g, want %g", i, j, c[i*n+j], want)
							}
						}
					}
					for i := m * n; i < len(c); i++ {
						if c[i] != c0[i] {
							t.Fatalf("c[%d] past the product changed", i)
						}
					}
				})
			}
		}
	}
}

// TestMulRowsIndependent checks that a row's result is bit for bit the same
// whatever the rows around it: computed alone, or within a full tile.
func TestMulRowsIndependent(t *testing.T) { widths(t, testMulRowsIndependent) }

func testMulRowsIndependent(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	m, k, n := 13, 40, 35
	a, bm := randMat(rng, m*k), randMat(rng, n*k)
	b := New(k, n)
	b.SetT(bm)
	all := make([]float32, m*n)
	b.Mul(all, a, m, false)
	for i := 0; i < m; i++ {
		one := make([]float32, n)
		b.Mul(one, a[i*k:(i+1)*k], 1, false)
		for j := range one {
			if one[j] != all[i*n+j] {
				t.Fatalf("row %d col %d: alone %g, in the batch %g", i, j, one[j], all[i*n+j])
			}
		}
	}
}

// TestAddTN checks c += aᵀ·b against the float64 sum, with a last tile of
// fewer than 6 rows.
func TestAddTN(t *testing.T) { widths(t, testAddTN) }

func testAddTN(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	for _, s := range [][3]int{{1, 1, 1}, {7, 6, 2}, {33, 13, 1}, {64, 98, 4}, {300, 7, 3}} {
		k, m, n := s[0], s[1], s[2]*width // k 300: three blocks of k
		a, b, c0 := randMat(rng, k*m), randMat(rng, k*n), randMat(rng, m*n+3)
		c := append([]float32(nil), c0...)
		AddTN(c, a, m, b, k, m, n)
		for i := 0; i < m; i++ {
			for j := 0; j < n; j++ {
				want := float64(c0[i*n+j])
				for l := 0; l < k; l++ {
					want += float64(a[l*m+i]) * float64(b[l*n+j])
				}
				if d := math.Abs(float64(c[i*n+j]) - want); d > 1e-5*(1+math.Abs(want)) {
					t.Fatalf("%v: c[%d][%d] = %g, want %g", s, i, j, c[i*n+j], want)
				}
			}
		}
		for i := m * n; i < len(c); i++ {
			if c[i] != c0[i] {
				t.Fatalf("%v: c[%d] past the product changed", s, i)
			}
		}
	}
}

// benchWidths runs the benchmark f once per kernel (eachWidth).
func benchWidths(b *testing.B, f func(b *testing.B)) {
	eachWidth(b, func(w int) { b.Run(fmt.Sprintf("width=%d", w), f) })
}

// The products of a `base` shard (992 rows) and of a decode step (64 rows).
func BenchmarkMul(b *testing.B) {
	benchWidths(b, func(b *testing.B) {
		for _, s := range [][3]int{{64, 128, 768}, {992, 128, 768}, {992, 384, 128}} {
			m, k, n := s[0], s[1], s[2]
			rng := rand.New(rand.NewPCG(1, 2))
			a, w, c := randMat(rng, m*k), randMat(rng, n*k), make([]float32, m*n)
			p := New(k, n)
			p.SetT(w)
			b.Run(fmt.Sprintf("%dx%dx%d", m, k, n), func(b *testing.B) {
				for b.Loop() {
					p.Mul(c, a, m, false)
				}
				b.ReportMetric(2*float64(m*k*n)*float64(b.N)/b.Elapsed().Seconds()/1e9, "GFLOP/s")
			})
		}
	})
}

// The weight gradients of a `base` shard.
func BenchmarkAddTN(b *testing.B) {
	benchWidths(b, func(b *testing.B) {
		for _, s := range [][3]int{{992, 768, 128}, {992, 128, 384}, {992, 384, 128}} {
			k, m, n := s[0], s[1], s[2]
			rng := rand.New(rand.NewPCG(1, 2))
			x, y, c := randMat(rng, k*m), randMat(rng, k*n), make([]float32, m*n)
			b.Run(fmt.Sprintf("%dx%dx%d", k, m, n), func(b *testing.B) {
				for b.Loop() {
					AddTN(c, x, m, y, k, m, n)
				}
				b.ReportMetric(2*float64(m*k*n)*float64(b.N)/b.Elapsed().Seconds()/1e9, "GFLOP/s")
			})
		}
	})
}
