//go:build nvrtc && !cudaemu

package cuda_test

import "testing"

// checkEmulatedParams has nothing to check without the emulator.
func checkEmulatedParams(*testing.T, map[string][]string) {}
