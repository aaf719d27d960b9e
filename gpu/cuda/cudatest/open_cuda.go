//go:build cuda

package cudatest

import (
	"sync"
	"testing"

	"github.com/mgrpo/mgrpo/gpu/cuda"
	"github.com/mgrpo/mgrpo/gpu/cuda/kernels"
)

// OnDevice is true: the tests run on GPU 0.
const OnDevice = true

var (
	once    sync.Once
	shared  cuda.Runtime
	openErr error
)

// Open returns the runtime of GPU 0 with the kernels compiled for it. It
// is opened once per test binary (compiling the kernels takes seconds) and
// never closed.
func Open(t testing.TB) cuda.Runtime {
	t.Helper()
	once.Do(func() { shared, openErr = cuda.Open(0, kernels.Program()) })
	if openErr != nil {
		t.Fatal(openErr)
	}
	return shared
}
