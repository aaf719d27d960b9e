package actors

import "github.com/mgrpo/mgrpo/internal/seeds"

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

// stageSeed mixes the run seed, the step, the stage and an index (a
// prompt's slot, a refill round) into one 64-bit seed.
func stageSeed(seed int64, step int64, stage uint64, index uint64) uint64 {
	return seeds.Of(uint64(seed), uint64(step), stage, index)
}
