// Package seeds derives independent random seeds from one, so that every
// random draw of a run can be seeded from what it is for (run seed, step,
// stage, prompt) rather than from a stream shared with other draws.
package seeds

// Mix is the SplitMix64 output function (Steele, Lea & Flood 2014): a
// bijection of uint64 whose outputs for nearby inputs look independent.
func Mix(z uint64) uint64 {
	z += 0x9e3779b97f4a7c15
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9
	z = (z ^ (z >> 27)) * 0x94d049bb133111eb
	return z ^ (z >> 31)
}

// Of mixes parts, in order, into one seed: Of(a, b) differs from Of(b, a)
// and from Of(a) for the same a.
//
//	Of(p0, p1, ...) = Mix(...Mix(Mix(p0 ^ γ) ^ p1)...),  γ = 0x9e3779b97f4a7c15
func Of(parts ...uint64) uint64 {
	h := uint64(0)
	for i, p := range parts {
		if i == 0 {
			p ^= 0x9e3779b97f4a7c15
		}
		h = Mix(h ^ p)
	}
	return h
}
