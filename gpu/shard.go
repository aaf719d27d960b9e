package gpu

import "sync/atomic"

// A batch runs through the model in shards: contiguous ranges of its
// sequences, each with its own workspace, run whole by one goroutine with
// single-threaded kernels and products (the workers take the shards from a
// queue). The shards never wait for each other inside a pass; splitting
// each of a pass's hundred-odd kernels and products over the cores instead
// cost a hand-off per kernel, and left the serial parts (gradient sums over
// rows) on one core.

// maxShardGradBytes bounds the extra gradient buffer a learner keeps per
// shard beyond the first: models whose gradients are larger train in one
// shard, with each product and kernel split over the cores.
const maxShardGradBytes = 64 << 20

// batch is the workspace of one shape (B, T), split into shards.
type batch[F Float] struct {
	B, T    int
	parts   []*acts[F]
	first   []int // first sequence of each part; first[len(parts)] = B
	workers int   // goroutines that run the parts
}

// shardsPerWorker is how many shards each worker has on average: the
// workers take them from a queue, so one slowed by another process on its
// core leaves more of them to the others.
const shardsPerWorker = 2

// shardCount is the number of shards of a batch of b sequences run by
// workers goroutines: shardsPerWorker per worker when there are several,
// at most one per sequence.
func shardCount(b, workers int) int {
	if workers <= 1 {
		return 1
	}
	return max(min(b, shardsPerWorker*workers), 1)
}

// newBatch allocates the workspace of shape (b, t) in shards parts (train:
// with the buffers of the backward pass, see newActs). One part is run by
// the whole net (workers goroutines), several by its single-threaded view.
func newBatch[F Float](c Config, b, t, shards, workers int, train bool) *batch[F] {
	bt := &batch[F]{B: b, T: t, first: make([]int, shards+1), workers: min(workers, shards)}
	for i := range bt.first {
		bt.first[i] = i * b / shards
	}
	for i := 0; i < shards; i++ {
		bt.parts = append(bt.parts, newPart[F](c, bt.first[i+1]-bt.first[i], t, partWorkers(shards, workers), shards, train))
	}
	return bt
}

func partWorkers(shards, workers int) int {
	if shards > 1 {
		return 1
	}
	return workers
}

// batchBytes is the size of newBatch(c, b, t, shards, workers, train).
func batchBytes(c Config, b, t, shards, workers int, train bool) float64 {
	var sum float64
	for i := 0; i < shards; i++ {
		sum += actsBytes(c, (i+1)*b/shards-i*b/shards, t, partWorkers(shards, workers), shards, train)
	}
	return sum
}

// each runs f for every part, on bt.workers goroutines that take the parts
// in order from a shared counter.
func (bt *batch[F]) each(f func(i int, a *acts[F])) {
	var next atomic.Int64
	parallelFor(bt.workers, bt.workers, func(_, _, _ int) {
		for i := int(next.Add(1)) - 1; i < len(bt.parts); i = int(next.Add(1)) - 1 {
			f(i, bt.parts[i])
		}
	})
}

// load plans seqs (B of them, width completion slots each) into the
// parts: part i's sequences, with their slots in the whole batch's
// per-token arrays.
func (bt *batch[F]) load(seqs []Sequence, width int) {
	for i, a := range bt.parts {
		lo, hi := bt.first[i], bt.first[i+1]
		planRows(&a.rowPlan, seqs[lo:hi], lo, width, true)
		a.N = len(a.tokens)
	}
}

// forward runs n over b's sequences (B of them) and writes the log-prob
// of each completion token and the entropy it was drawn from to its slot
// of lp and ent ([B·Width]), zeros to the slots past each completion.
func (bt *batch[F]) forward(n *net[F], b Batch, temp float64, lp, ent []float64) {
	w := b.width()
	bt.load(b.Seqs, w)
	bt.each(func(_ int, a *acts[F]) { n.forward(a, temp) })
	clear(lp[:len(b.Seqs)*w])
	clear(ent[:len(b.Seqs)*w])
	for _, a := range bt.parts {
		a.outputs(lp, ent)
	}
}

// serial returns a view of n's weights whose kernels and products run on
// the calling goroutine (for one shard).
func (n *net[F]) serial() *net[F] {
	s := *n
	s.workers, s.mm = 1, cpuLinear[F]{1, n.pk}
	return &s
}
