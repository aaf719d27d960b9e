package gpu

import (
	"reflect"
	"testing"
)

// TestActsBytesExact: actsBytes is what newPart allocates, buffer for
// buffer (shared layer buffers counted once), up to the plan's few
// per-sequence arrays, for every decoder family, training or scoring, on
// one worker or several, alone or as one of 8 parts of a batch (which
// share the tail's block of logits: at 50,000 tokens the block is then
// shorter than the workspace).
func TestActsBytesExact(t *testing.T) {
	base := Config{Vocab: 98, Hidden: 64, Layers: 3, Heads: 4, KVHeads: 2, MLP: 96, Context: 64, RopeTheta: 10000, NormEps: 1e-6}
	wide := base
	wide.Vocab = 50000
	for _, cfg := range append(memoryArchs(base), wide) {
		for _, train := range []bool{true, false} {
			for _, wp := range [][2]int{{1, 1}, {3, 1}, {1, 8}} {
				const b, tt = 5, 24
				workers, parts := wp[0], wp[1]
				got := allocatedBytes(reflect.ValueOf(newPart[float32](cfg, b, tt, workers, parts, train)), map[uintptr]bool{})
				want := actsBytes(cfg, b, tt, workers, parts, train)
				if perSeq := float64(got) - want; perSeq < 0 || perSeq > 12*(b+1) { // start, pre, from: int32
					t.Errorf("%s vocab %d train %t workers %d parts %d: newPart allocates %d bytes, actsBytes says %.0f", cfg.Arch, cfg.Vocab, train, workers, parts, got, want)
				}
			}
		}
	}
}

// allocatedBytes sums the capacities of the slices reachable from v
// through pointers, structs and slices of slices, each backing array
// once.
func allocatedBytes(v reflect.Value, seen map[uintptr]bool) int {
	switch v.Kind() {
	case reflect.Pointer:
		if v.IsNil() {
			return 0
		}
		return allocatedBytes(v.Elem(), seen)
	case reflect.Struct:
		sum := 0
		for i := range v.NumField() {
			sum += allocatedBytes(v.Field(i), seen)
		}
		return sum
	case reflect.Slice:
		if v.Cap() == 0 || seen[v.Pointer()] {
			return 0
		}
		seen[v.Pointer()] = true
		if v.Type().Elem().Kind() != reflect.Slice {
			return v.Cap() * int(v.Type().Elem().Size())
		}
		sum := 0
		for i := range v.Len() {
			sum += allocatedBytes(v.Index(i), seen)
		}
		return sum
	}
	return 0
}
