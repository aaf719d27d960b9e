// Package panel multiplies row-major float32 matrices by a matrix packed
// once into panels of 16 or 32 columns (the kernel's width: AVX2 or
// AVX-512), for the model's weight products: a weight is packed after each
// update and then serves every product of a pass, where a BLAS call packs
// its operands again on every call. On the model's shapes (a few dozen to
// a thousand rows, inner and outer dimensions of a few hundred) packing
// and zeroing the output took a tenth of a BLAS call's time.
package panel

// Available reports whether this build and CPU have a kernel (AVX2 and
// FMA, or AVX-512, on amd64). When it is false, Mul and AddTN panic:
// callers keep their BLAS.
func Available() bool { return haveKernel }

// Info names the kernel: "AVX-512", "AVX2+FMA", or "none" where
// Available is false.
func Info() string {
	switch {
	case !haveKernel:
		return "none"
	case width == 32:
		return "AVX-512"
	}
	return "AVX2+FMA"
}

// Width is the kernel's panel width, 16 or 32 columns: AddTN's n must be a
// multiple of it.
func Width() int { return width }

// kernelWidth is the panel width for a CPU with or without AVX-512.
func kernelWidth(avx512 bool) int {
	if avx512 {
		return 32
	}
	return 16
}

// MaxBytes is the largest packed matrix Fits accepts: the kernel reads the
// whole of B for every six rows of A, so B must stay in the core's L2
// cache (1 MiB and up on the AVX-512 servers, 512 KiB on Zen 2 and 3).
const MaxBytes = 512 << 10

// Fits reports whether a k×n matrix is small enough to pack (MaxBytes).
func Fits(k, n int) bool { return Bytes(k, n) <= MaxBytes }

// Bytes is the memory of a packed k×n matrix: its columns rounded up to
// whole panels.
func Bytes(k, n int) int { return panels(n) * width * k * 4 }

// Matrix is a k×n matrix B in the kernel's layout: panels of W = Width()
// columns, panel p holding B[i][Wp+j] at p·Wk + Wi + j, zero past column n.
type Matrix struct {
	k, n int
	p    []float32
}

func panels(n int) int { return (n + width - 1) / width }

// New returns room for a k×n matrix (all zero).
func New(k, n int) *Matrix {
	return &Matrix{k: k, n: n, p: make([]float32, Bytes(k, n)/4)}
}

// Clone returns a copy of b.
func (b *Matrix) Clone() *Matrix {
	return &Matrix{k: b.k, n: b.n, p: append([]float32(nil), b.p...)}
}

// K is the matrix's number of rows (the products' inner dimension).
func (b *Matrix) K() int { return b.k }

// N is the matrix's number of columns.
func (b *Matrix) N() int { return b.n }

// Set packs B = m, m row-major [k, n].
func (b *Matrix) Set(m []float32) {
	k, n := b.k, b.n
	_ = m[:k*n]
	for p := 0; p < panels(n); p++ {
		w := min(width, n-width*p)
		dst := b.p[p*width*k : (p+1)*width*k]
		for i := 0; i < k; i++ {
			copy(dst[width*i:width*i+w], m[i*n+width*p:i*n+width*p+w])
		}
	}
}

// SetT packs B = mᵀ, m row-major [n, k] (a weight [out, in] for x·wᵀ).
func (b *Matrix) SetT(m []float32) {
	k, n := b.k, b.n
	_ = m[:k*n]
	for c := 0; c < n; c++ {
		p, j := c/width, c%width
		dst := b.p[p*width*k:]
		for i, v := range m[c*k : (c+1)*k] {
			dst[width*i+j] = v
		}
	}
}

// Mul computes c = a·B (+ c when acc) for the m rows of a ([m, k],
// row-major) into c ([m, n], row-major). Every element is one sum over k
// in order, so a row's result does not depend on m or on the other rows.
func (b *Matrix) Mul(c, a []float32, m int, acc bool) {
	k, n := b.k, b.n
	if m == 0 || n == 0 {
		return
	}
	_ = c[m*n-1]
	if k == 0 {
		if !acc {
			clear(c[:m*n])
		}
		return
	}
	_ = a[m*k-1]
	var rows [6]*float32
	var tile [6 * 32]float32 // edge tiles: fewer than 6 rows or width columns
	for r := 0; r < m; r += 6 {
		h := min(6, m-r)
		for i := range rows {
			rows[i] = &a[(r+min(i, h-1))*k] // rows past m repeat the last
		}
		for p := 0; p < panels(n); p++ {
			w := min(width, n-width*p)
			bp := &b.p[p*width*k]
			at := r*n + width*p
			if h == 6 && w == width {
				kernel(&rows, 1, bp, width, k, &c[at], n, acc)
				continue
			}
			if acc {
				for i := 0; i < h; i++ {
					copy(tile[width*i:width*i+w], c[at+i*n:at+i*n+w])
				}
			}
			kernel(&rows, 1, bp, width, k, &tile[0], width, acc)
			for i := 0; i < h; i++ {
				copy(c[at+i*n:at+i*n+w], tile[width*i:width*i+w])
			}
		}
	}
}

// AddTN accumulates c += aᵀ·b, a [k, m] with row stride lda ≥ m, b [k, n]
// and c [m, n] row-major: a weight's gradient dyᵀ·x, or the rows of it
// from a range of dy's columns. Neither operand is packed (both change
// with every call); k runs in blocks of tnBlock, over which the six
// columns of a that a tile reads stay in the L1 cache. n must be a
// multiple of Width().
func AddTN(c, a []float32, lda int, b []float32, k, m, n int) {
	if n%width != 0 {
		panic("panel: AddTN needs n a multiple of the panel width")
	}
	if m == 0 || n == 0 || k == 0 {
		return
	}
	_, _, _ = a[(k-1)*lda+m-1], b[k*n-1], c[m*n-1]
	var rows [6]*float32
	var tile [6 * 32]float32 // the last tile when m is not a multiple of 6
	for l0 := 0; l0 < k; l0 += tnBlock {
		kb := min(tnBlock, k-l0)
		for r := 0; r < m; r += 6 {
			h := min(6, m-r)
			for i := range rows {
				rows[i] = &a[l0*lda+r+min(i, h-1)] // column r+i of a: row r+i of aᵀ
			}
			for p := 0; p < n/width; p++ {
				at, bp := r*n+width*p, &b[l0*n+width*p]
				if h == 6 {
					kernel(&rows, lda, bp, n, kb, &c[at], n, true)
					continue
				}
				for i := 0; i < h; i++ {
					copy(tile[width*i:width*(i+1)], c[at+i*n:at+i*n+width])
				}
				kernel(&rows, lda, bp, n, kb, &tile[0], width, true)
				for i := 0; i < h; i++ {
					copy(c[at+i*n:at+i*n+width], tile[width*i:width*(i+1)])
				}
			}
		}
	}
}

// tnBlock is AddTN's block of k: 128 rows of b's panel (8 or 16 KiB) and
// of the tile's columns of a (8 KiB) (measured against 64 to 512 on Zen 4,
// where 128 and 256 were fastest; packing each block of b as Mul's B is
// packed measured the same in a learner step, and was dropped).
const tnBlock = 128
