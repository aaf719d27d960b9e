package gpu

import (
	"fmt"
	"runtime"
	"sync"
)

// cpuModel is the CPU's ModelEngine: a net over its own weights, packed
// for x·wᵀ, scoring workspaces and sampling caches kept for reuse.
type cpuModel struct {
	cfg Config
	net *net[float32]
	one *net[float32] // net's weights, single-threaded: each shard's (shard.go)

	mu       sync.Mutex
	spare    map[[2]int]*batch[float32] // idle scoring workspaces by (B, T)
	decoders decoderPool[float32]       // idle sampling caches
}

// newCPUModel returns a model engine over w (which it takes) on
// GOMAXPROCS goroutines. When w is a copy of the weights of net src, it
// copies src's packing (a learner's snapshot); otherwise it packs.
func newCPUModel(cfg Config, w []float32, src *net[float32]) *cpuModel {
	n := newNet(cfg, w, runtime.GOMAXPROCS(0))
	n.packLike(src)
	return &cpuModel{cfg: cfg, net: n, one: n.serial(), spare: map[[2]int]*batch[float32]{}}
}

// Score implements ModelEngine in chunks of at most scoreChunk sequences,
// each in a forward-only workspace of its shape.
func (m *cpuModel) Score(b Batch, temperature float64, lp, ent []float64) error {
	w := b.width()
	for lo := 0; lo < len(b.Seqs); lo += scoreChunk {
		hi := min(lo+scoreChunk, len(b.Seqs))
		chunk := Batch{Seqs: b.Seqs[lo:hi], Width: w}
		bt, err := m.workspace(len(chunk.Seqs), paddedLen(m.cfg, chunk.Seqs))
		if err != nil {
			return err
		}
		bt.forward(passNet(m.net, m.one, bt), chunk, temperature, lp[lo*w:hi*w], ent[lo*w:hi*w])
		m.release(bt)
	}
	return nil
}

// Sample implements ModelEngine.
func (m *cpuModel) Sample(prompts [][]int, n int, opt SampleOptions) ([]Sample, error) {
	return sampleChecked(m.net, &m.decoders, prompts, n, opt)
}

// ReadWeights implements ModelEngine.
func (m *cpuModel) ReadWeights(dst []float32, offset int) error {
	return readRange(dst, m.net.w.flat, offset)
}

// hostWeights lends the weights (read only).
func (m *cpuModel) hostWeights() []float32 { return m.net.w.flat }

// workspace takes an idle workspace of shape (b, t) or makes one (if it
// fits in memory); give it back with release.
func (m *cpuModel) workspace(b, t int) (*batch[float32], error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if bt, ok := m.spare[[2]int{b, t}]; ok {
		delete(m.spare, [2]int{b, t})
		return bt, nil
	}
	shards := shardCount(b, m.net.workers)
	need := toBytes(batchBytes(m.cfg, b, t, shards, m.net.workers, false))
	if err := CheckMemory(fmt.Sprintf("scoring %d sequences × %d tokens", b, t), need); err != nil {
		return nil, err
	}
	return newBatch[float32](m.cfg, b, t, shards, m.net.workers, false), nil
}

func (m *cpuModel) release(bt *batch[float32]) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if len(m.spare) >= 2 { // bound the memory kept for odd shapes
		clear(m.spare)
	}
	m.spare[[2]int{bt.B, bt.T}] = bt
}

// device is where the model's weights live: host memory.
func (m *cpuModel) device() Device { return CPU{} }
