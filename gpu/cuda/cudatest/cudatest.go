package cudatest

import (
	"testing"

	"github.com/mgrpo/mgrpo/gpu/cuda"
)

// Upload copies s to new device memory, freed when the test ends.
func Upload[T any](t testing.TB, rt cuda.Runtime, s []T) cuda.Ptr {
	t.Helper()
	p, err := cuda.UploadSlice(rt, s)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { rt.Free(p) })
	return p
}

// Alloc returns n elements of device memory of T's size, filled with
// 0xff bytes (NaN for floats, −1 for integers) so that a kernel that
// forgets to write an element shows it; freed when the test ends.
func Alloc[T any](t testing.TB, rt cuda.Runtime, n int) cuda.Ptr {
	t.Helper()
	var z [1]T
	bytes := int64(max(n, 1) * len(cuda.Bytes(z[:])))
	p, err := rt.Alloc(bytes)
	if err == nil {
		err = rt.Memset(p, 0xff, bytes)
	}
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { rt.Free(p) })
	return p
}

// Download returns n elements read from p.
func Download[T any](t testing.TB, rt cuda.Runtime, p cuda.Ptr, n int) []T {
	t.Helper()
	out := make([]T, n)
	if err := cuda.DownloadSlice(rt, out, p); err != nil {
		t.Fatal(err)
	}
	return out
}

// Must fails the test on err (a launch's, typically).
func Must(t testing.TB, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}
