package gpu

import "sync"

// parallelFor splits [0, n) into at most workers contiguous chunks and runs
// fn(chunk, lo, hi) for each, concurrently, returning when all are done.
// Kernels use it only for work whose result does not depend on the split
// (rows or sequences written independently), so results are deterministic.
func parallelFor(n, workers int, fn func(chunk, lo, hi int)) {
	if workers > n {
		workers = n
	}
	if workers <= 1 {
		if n > 0 {
			fn(0, 0, n)
		}
		return
	}
	var wg sync.WaitGroup
	per, rem := n/workers, n%workers
	lo := 0
	for c := 0; c < workers; c++ {
		hi := lo + per
		if c < rem {
			hi++
		}
		if c == workers-1 {
			fn(c, lo, hi)
			break
		}
		wg.Add(1)
		go func(c, lo, hi int) {
			defer wg.Done()
			fn(c, lo, hi)
		}(c, lo, hi)
		lo = hi
	}
	wg.Wait()
}
