//go:build nvrtc && cudaemu

package cuda_test

import (
	"testing"

	"github.com/mgrpo/mgrpo/gpu/cuda"
	"github.com/mgrpo/mgrpo/gpu/cuda/kernels"
)

// TestPTXParamsMatchTheEmulator checks each kernel's PTX parameters
// against the argument kinds the emulator reads from its C++ signature:
// a launch the emulator accepts passes the device runtime's check too.
func TestPTXParamsMatchTheEmulator(t *testing.T) {
	ptx, err := cuda.CompilePTX(kernels.Program(), 9, 0)
	if err != nil {
		t.Fatal(err)
	}
	entries := cuda.PTXEntries(ptx)
	for name, kinds := range kernels.Emulated() {
		k := make([]cuda.ArgKind, len(kinds))
		for i := range kinds {
			k[i] = cuda.ArgKind(kinds[i])
		}
		if err := cuda.CheckArgs(name, entries[name], k); err != nil {
			t.Errorf("%v (PTX %v)", err, entries[name])
		}
	}
}
