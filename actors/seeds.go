package actors

// Stages that draw random numbers. Each draw is seeded from (run seed,
// step, stage, index), never from a stream shared by stages, so results do
// not depend on which actor did the work or in which order replies arrived.
const (
	stagePrompts uint64 = iota + 1
	stageGenerate
	stageWarmStart
	stageEval
	stageShuffle
)

// stageSeed mixes the run seed, the step, the stage and an index (a prompt's
// slot, a refill round) into one 64-bit seed with SplitMix64 finalisers.
func stageSeed(seed int64, step int64, stage uint64, index uint64) uint64 {
	h := mix64(uint64(seed) ^ 0x9e3779b97f4a7c15)
	h = mix64(h ^ uint64(step))
	h = mix64(h ^ stage)
	return mix64(h ^ index)
}

// mix64 is the SplitMix64 output function (Steele, Lea & Flood 2014).
func mix64(z uint64) uint64 {
	z += 0x9e3779b97f4a7c15
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9
	z = (z ^ (z >> 27)) * 0x94d049bb133111eb
	return z ^ (z >> 31)
}
