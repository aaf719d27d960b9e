//go:build nvrtc && cudaemu

package cuda_test

import (
	"testing"

	"github.com/mgrpo/mgrpo/gpu/cuda"
	"github.com/mgrpo/mgrpo/gpu/cuda/kernels"
)

// checkEmulatedParams checks each kernel's PTX parameters against the
// argument kinds the emulator reads from its C++ signature: a launch the
// emulator accepts passes the device runtime's check too.
func checkEmulatedParams(t *testing.T, entries map[string][]string) {
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
