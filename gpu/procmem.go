package gpu

import (
	"runtime"
	"runtime/metrics"
)

// MemoryReading is what a memory check compares an estimate with: the
// memory the machine has available (MemAvailable of /proc/meminfo) and the
// part of this process's heap that the Go runtime holds but no object
// uses. An allocation takes the second before it asks the machine, so a
// process is never refused memory it holds itself.
type MemoryReading struct {
	// Machine is MemAvailable in bytes; Known is false when it cannot be
	// read (then nothing is refused).
	Machine int64
	Known   bool
	// Reusable is this process's free and unused heap: spans the runtime
	// keeps without objects in them, and the unused parts of spans in use
	// (runtime/metrics /memory/classes/heap/free and .../unused). Garbage
	// not yet collected is not in it until a collection frees it.
	Reusable int64
	// Held is all the memory the Go runtime holds from the machine
	// (/memory/classes/total less what it released), Reusable included:
	// what a Go memory limit (runtime/debug.SetMemoryLimit) counts.
	Held int64
}

// Available is the memory a new allocation of this process can have:
// the machine's and the process's reusable heap.
func (r MemoryReading) Available() int64 {
	if r.Reusable > 0 && r.Machine > (1<<62)-r.Reusable {
		return 1 << 62
	}
	return r.Machine + max(r.Reusable, 0)
}

// ReadMemory reads the machine's available memory and this process's
// reusable and held memory.
func ReadMemory() MemoryReading {
	avail, known := AvailableMemory()
	s := []metrics.Sample{{Name: metricHeapFree}, {Name: metricHeapUnused}, {Name: metricTotal}, {Name: metricReleased}}
	metrics.Read(s)
	v := make([]int64, len(s))
	for i, x := range s {
		if x.Value.Kind() == metrics.KindUint64 {
			v[i] = int64(min(x.Value.Uint64(), 1<<61))
		}
	}
	return MemoryReading{Machine: avail, Known: known, Reusable: v[0] + v[1], Held: max(v[2]-v[3], 0)}
}

// The figures of runtime/metrics that ReadMemory reads: the heap's free
// and unused bytes (Reusable), all the runtime's memory and what of it was
// released to the machine (Held).
const (
	metricHeapFree   = "/memory/classes/heap/free:bytes"
	metricHeapUnused = "/memory/classes/heap/unused:bytes"
	metricTotal      = "/memory/classes/total:bytes"
	metricReleased   = "/memory/classes/heap/released:bytes"
)

// checkMemoryWith is CheckMemory on the readings of read: when need does
// not fit in the first reading, collect (a garbage collection: what this
// process no longer uses becomes reusable heap) runs once and a second
// reading decides. The refusal names the second reading.
func checkMemoryWith(what string, need int64, read func() MemoryReading, collect func()) error {
	r := read()
	if !r.Known || need <= r.Available() {
		return nil
	}
	collect()
	r = read()
	return checkMemory(what, need, r.Available(), r.Known)
}

// collectGarbage is the collect of CheckMemory.
func collectGarbage() { runtime.GC() }
