//go:build cudaemu && !cuda

package cudatest

import (
	"testing"

	"github.com/mgrpo/mgrpo/gpu/cuda"
	"github.com/mgrpo/mgrpo/gpu/cuda/emu"
)

// OnDevice is false: the tests run on the emulator, and its own checks
// (barrier mismatches, poisoned shared memory) run too.
const OnDevice = false

// Open returns the CPU emulator, closed when the test ends.
func Open(t testing.TB) cuda.Runtime {
	rt := emu.New(0)
	t.Cleanup(func() { rt.Close() })
	return rt
}
