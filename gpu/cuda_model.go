//go:build cuda || cudaemu

package gpu

import (
	"fmt"
	"runtime"
	"sync"
)

// cudaModel is the CUDA device's ModelEngine: its own copy of the weights
// on the device, a forward-only workspace (one layer's activations,
// shared by all layers) for scoring, and a decoder (key/value cache) for
// sampling (cuda_sample.go), each kept for the next call that fits. Its
// device memory is freed by a cleanup when it is garbage collected.
type cudaModel struct {
	dev *cudaDevice
	net *cudaNet

	mu     sync.Mutex // one call at a time: guards what follows
	ws     *cudaActs
	wsMem  *arena
	plan   rowPlan
	dec    *cudaDecoder
	decMem *arena
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
	m := &cudaModel{dev: d, net: n, wsMem: &arena{dev: d}, decMem: &arena{dev: d}}
	runtime.AddCleanup(m, releaseAll, []*arena{n.mem, m.wsMem, m.decMem})
	return m, nil
}

// newCUDAModelFrom returns a model over a device-to-device copy of src's
// weights (a learner's snapshot). It returns once the copy is done, so
// that whoever times a snapshot (the run's weight sync) times the copy,
// not the work queued after it.
func newCUDAModelFrom(src *cudaNet) (*cudaModel, error) {
	m, err := newCUDAModel(src.dev, src.cfg)
	if err != nil {
		return nil, fmt.Errorf("snapshot: %w", err)
	}
	if err := m.net.copyFrom(src); err != nil {
		return nil, fmt.Errorf("snapshot: %w", err)
	}
	if err := m.net.rt.Synchronize(); err != nil {
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
		if err := m.net.forward(ws, &m.plan, false, temperature, lp[lo*w:hi*w], ent[lo*w:hi*w]); err != nil {
			return fmt.Errorf("score: %w", err)
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

// Sample implements ModelEngine on the device (cuda_sample.go).
func (m *cudaModel) Sample(prompts [][]int, n int, opt SampleOptions) ([]Sample, error) {
	defer runtime.KeepAlive(m)
	m.mu.Lock()
	defer m.mu.Unlock()
	job := newSampleJob(m.net.cfg, prompts, n, opt)
	d, err := m.decoder(job.shape)
	if err != nil {
		return nil, fmt.Errorf("sample: %w", err)
	}
	p := &cudaPass{n: m.net, rt: m.net.rt, s16: d.s16, cap16: d.cap16}
	if err := d.sample(p, job); err != nil {
		return nil, err
	}
	return job.out, nil
}

// ReadWeights implements ModelEngine.
func (m *cudaModel) ReadWeights(dst []float32, offset int) error {
	defer runtime.KeepAlive(m)
	return m.net.readWeights(dst, offset)
}

// device is the device the model's weights live on.
func (m *cudaModel) device() Device { return m.dev }

// dtype is the precision of the model's products (Model.DType).
func (m *cudaModel) dtype() string { return m.dev.dtype() }
