package optim

import "sync"

// split runs fn over every element of params, the elements taken in order
// as one sequence cut into workers contiguous parts, each part on its own
// goroutine: fn(part, i, lo, hi) covers params[i] elements lo..hi-1 and is
// called in order within a part. Element-wise updates do not depend on
// the split; sums are combined per part, in part order.
func split(params []Param, workers int, fn func(part, i, lo, hi int)) {
	total := 0
	for _, p := range params {
		total += len(p.W)
	}
	workers = max(min(workers, total/minPartSize), 1)
	run := func(part int) {
		start, end := part*total/workers, (part+1)*total/workers
		off := 0
		for i, p := range params {
			lo, hi := max(start-off, 0), min(end-off, len(p.W))
			if lo < hi {
				fn(part, i, lo, hi)
			}
			off += len(p.W)
		}
	}
	var wg sync.WaitGroup
	for part := 1; part < workers; part++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			run(part)
		}()
	}
	run(0)
	wg.Wait()
}

// minPartSize keeps small models on one goroutine.
const minPartSize = 1 << 15
