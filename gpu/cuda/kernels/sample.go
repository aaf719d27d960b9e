package kernels

import "github.com/mgrpo/mgrpo/gpu/cuda"

// SampleOptions are the drawer's settings, as gpu.SampleOptions has them.
type SampleOptions struct {
	Temperature float64 // > 0 (greedy: any; 0 reads as 1)
	TopK        int     // 0: off
	TopP        float64 // 0 or 1: off
	Greedy      bool
	EOS         int // ≤ 0: none
}

// SampleRows is the drawing state of r rows on the device: per row its
// prompt's seed (seeds, uint64), its completion index within the prompt
// (completion), its token limit (limit), and the tokens drawn so far
// (count, which SampleTokens advances), all int32 but seeds.
type SampleRows struct {
	Seeds, Completion, Limit, Count cuda.Ptr
}

// SampleTokens draws the next token of each of r rows of logits ([r, v])
// into tokens with its log-prob and entropy over the full vocabulary at
// the temperature (logp, entropy [r]), and sets finish ([r] int32): 1 if it
// drew EOS, 2 if the row reached its limit, else 0; as drawToken with
// counter-based random numbers (see sample.cuh).
func SampleTokens(rt cuda.Runtime, tokens, logp, entropy, finish, logits cuda.Ptr, rows SampleRows, r, v int, o SampleOptions) error {
	temp := o.Temperature
	if o.Greedy && temp == 0 {
		temp = 1
	}
	greedy := 0
	if o.Greedy {
		greedy = 1
	}
	threads := min(max((v/8+31)/32*32, 32), headThreads) // a small vocabulary needs few threads
	return launchRows(rt, "sample_tokens", r, threads, tokens, logp, entropy, finish, rows.Count, logits,
		rows.Seeds, rows.Completion, rows.Limit, r, v, float32(1/temp), o.TopK, float32(o.TopP), greedy, o.EOS)
}

// DrawUniform is the uniform number in [0, 1) that SampleTokens draws
// token t of completion j of a prompt with this seed from (mix64 in
// sample.cuh), for tests and for a CPU twin of the device's draws.
func DrawUniform(seed uint64, j, t int) float64 {
	u := mix64(mix64(mix64(seed)^uint64(uint32(j))) ^ uint64(uint32(t)))
	return float64(u>>11) / (1 << 53)
}

// mix64 is SplitMix64's finaliser.
func mix64(z uint64) uint64 {
	z += 0x9e3779b97f4a7c15
	z = (z ^ z>>30) * 0xbf58476d1ce4e5b9
	z = (z ^ z>>27) * 0x94d049bb133111eb
	return z ^ z>>31
}
