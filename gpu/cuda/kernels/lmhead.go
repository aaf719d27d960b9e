package kernels

import "github.com/mgrpo/mgrpo/gpu/cuda"

// headThreads is the block of the lm_head tail: V is thousands of columns.
const headThreads = 256

// LogSoftmaxEntropy reads k rows of logits ([k, v]) at temperature
// 1/inv and writes each row's target log-prob (targets [k] int32), its
// entropy, and the max and log-sum-exp the backward pass needs (logp, ent,
// rowmax, rowlse [k]), as logSoftmaxEntropy.
func LogSoftmaxEntropy(rt cuda.Runtime, logp, ent, rowmax, rowlse, logits, targets cuda.Ptr, k, v int, inv float32) error {
	return launchRows(rt, "logsoftmax_entropy", k, headThreads, logp, ent, rowmax, rowlse, logits, targets, k, v, inv)
}

// LogSoftmaxEntropyBackward writes the gradient wrt the k rows of logits
// into dlogits (which may be logits) from the upstream gradients dlp and dH
// ([k]), as logSoftmaxEntropyBackward, and unless dlogits16 is 0 the
// gradient rounded to bf16 there ([k, v] uint16s).
func LogSoftmaxEntropyBackward(rt cuda.Runtime, dlogits, dlogits16, logits, rowmax, rowlse, ent, targets, dlp, dH cuda.Ptr, k, v int, inv float32) error {
	return launchRows(rt, "logsoftmax_entropy_backward", k, headThreads, dlogits, dlogits16, logits, rowmax, rowlse, ent, targets, dlp, dH, k, v, inv)
}
