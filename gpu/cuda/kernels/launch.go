package kernels

import (
	"github.com/mgrpo/mgrpo/gpu/cuda"
)

// elementThreads is the block of the grid-stride element-wise kernels.
const elementThreads = 256

// maxElementBlocks caps their grid: enough blocks to fill an H100 or H200
// several times over; each thread then loops.
const maxElementBlocks = 4096

// Grid returns the grid of a grid-stride kernel over n elements with
// elementThreads threads a block: one element a thread up to
// maxElementBlocks blocks.
func Grid(n int64) cuda.Dim3 {
	return cuda.D1(int(min(max((n+elementThreads-1)/elementThreads, 1), maxElementBlocks)))
}

// launchElements runs a grid-stride kernel over n elements.
func launchElements(rt cuda.Runtime, name string, n int64, args ...any) error {
	if n == 0 {
		return nil
	}
	return rt.Launch(name, Grid(n), cuda.D1(elementThreads), 0, args...)
}

// rowThreads is the block of the kernels that run one block per row.
const rowThreads = 128

// launchRows runs a block-per-row kernel over rows rows (none: no launch).
func launchRows(rt cuda.Runtime, name string, rows, threads int, args ...any) error {
	if rows == 0 {
		return nil
	}
	return rt.Launch(name, cuda.D1(rows), cuda.D1(threads), 0, args...)
}
