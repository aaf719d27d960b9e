//go:build race

package gpu

// raceEnabled is true under -race, where the long learning test is skipped.
const raceEnabled = true
