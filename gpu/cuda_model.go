//go:build cuda || cudaemu

package gpu

import (
	"fmt"
	"runtime"
	"sync"
)

// cudaModel is the CUDA device's ModelEngine: its own copy of the weights
// on the device and a forward-only workspace (one layer's activations,
// shared by all layers) for scoring. Sampling runs on a host copy of the
// weights for now (a CPU model made on first use): the device decoder is
// issue 24's. Its device memory is freed by a cleanup when it is garbage
// collected.
type cudaModel struct {
	dev *cudaDevice
	net *cudaNet

	mu    sync.Mutex // one pass at a time: guards ws, wsMem and plan
	ws    *cudaActs
	wsMem *arena
	plan  rowPlan

	hostOnce sync.Once
	host     *cpuModel // the sampler's copy of the weights
	hostErr  error
}

// newCUDAModel allocates a model on d, after checking its weights fit.
func newCUDAModel(d *cudaDevice, cfg Config) (*cudaModel, error) {
	if err := checkCUDAConfig(cfg); err != nil {
		return nil, err
	}
	if err := d.checkFree("a model's weights", netBytes(d, cfg)); err != nil {
		return nil, err
	}
	n, err := newCUDANet(d, cfg)
	if err != nil {
		return nil, err
	}
	m := &cudaModel{dev: d, net: n, wsMem: &arena{dev: d}}
	runtime.AddCleanup(m, releaseAll, []*arena{n.mem, m.wsMem})
	return m, nil
}

// newCUDAModelFrom returns a model over a device-to-device copy of src's
// weights (a learner's snapshot).
func newCUDAModelFrom(src *cudaNet) (*cudaModel, error) {
	m, err := newCUDAModel(src.dev, src.cfg)
	if err != nil {
		return nil, fmt.Errorf("snapshot: %w", err)
	}
	if err := m.net.copyFrom(src); err != nil {
		return nil, fmt.Errorf("snapshot: %w", err)
	}
	return m, nil
}

// newCUDAModelFromHost returns a model over w (flat, TensorNames order),
// uploaded.
func newCUDAModelFromHost(d *cudaDevice, cfg Config, w []float32) (*cudaModel, error) {
	m, err := newCUDAModel(d, cfg)
	if err != nil {
		return nil, err
	}
	if err := m.net.setWeights(w); err != nil {
		return nil, err
	}
	return m, nil
}

// Score implements ModelEngine: chunks of at most scoreChunk sequences,
// each planned and run forward in the scoring workspace.
func (m *cudaModel) Score(b Batch, temperature float64, lp, ent []float64) error {
	defer runtime.KeepAlive(m)
	m.mu.Lock()
	defer m.mu.Unlock()
	w := b.width()
	for lo := 0; lo < len(b.Seqs); lo += scoreChunk {
		hi := min(lo+scoreChunk, len(b.Seqs))
		planRows(&m.plan, b.Seqs[lo:hi], 0, w, true)
		ws, err := m.workspace()
		if err != nil {
			return err
		}
		if err := ws.load(m.dev.rt, &m.plan, false); err != nil {
			return err
		}
		p := newCUDAPass(m.net, ws)
		if p.forward(temperature); p.err != nil {
			return fmt.Errorf("score: %w", p.err)
		}
		if err := ws.outputs(m.dev.rt, m.plan.slots, lp[lo*w:hi*w], ent[lo*w:hi*w]); err != nil {
			return err
		}
	}
	return nil
}

// workspace returns a scoring workspace with room for the planned chunk.
func (m *cudaModel) workspace() (*cudaActs, error) {
	s := planShape(&m.plan)
	ws, err := m.net.workspace(m.ws, m.wsMem, s, false, fmt.Sprintf("scoring %d sequences (%d rows)", s.B, s.N))
	m.ws = ws
	return ws, err
}

// Sample implements ModelEngine on a host copy of the weights (a CPU
// model made on first use and kept): the device decoder is not written
// yet.
func (m *cudaModel) Sample(prompts [][]int, n int, opt SampleOptions) ([]Sample, error) {
	defer runtime.KeepAlive(m)
	m.hostOnce.Do(func() {
		cfg := m.net.cfg
		if m.hostErr = CheckMemory("a host copy of the weights for sampling", cfg.ModelBytes()); m.hostErr != nil {
			return
		}
		w := make([]float32, cfg.NumParams())
		if m.hostErr = m.net.readWeights(w, 0); m.hostErr == nil {
			m.host = newCPUModel(cfg, w, nil)
		}
	})
	if m.hostErr != nil {
		return nil, fmt.Errorf("sample: %w", m.hostErr)
	}
	return m.host.Sample(prompts, n, opt)
}

// ReadWeights implements ModelEngine.
func (m *cudaModel) ReadWeights(dst []float32, offset int) error {
	defer runtime.KeepAlive(m)
	return m.net.readWeights(dst, offset)
}
