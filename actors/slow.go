package actors

import (
	"slices"
	"time"
)

// slowWindow is how many recent steps the automatic threshold looks at,
// and slowMinSteps how many it needs before it judges.
const (
	slowWindow   = 50
	slowMinSteps = 5
)

// slowSteps tells slow steps apart (trace.slow_step): slower than a fixed
// threshold, or, with auto, than twice the median of the previous
// slowWindow steps. The zero value marks nothing.
type slowSteps struct {
	fixed  time.Duration
	auto   bool
	recent []time.Duration // the last slowWindow step times, oldest first
}

// observe records a step that took d and reports whether it was slow,
// with the threshold it was held to.
func (s *slowSteps) observe(d time.Duration) (slow bool, threshold time.Duration) {
	threshold = s.fixed
	if s.auto && len(s.recent) >= slowMinSteps {
		sorted := slices.Clone(s.recent)
		slices.Sort(sorted)
		threshold = 2 * sorted[len(sorted)/2]
	}
	s.recent = append(s.recent, d)
	if len(s.recent) > slowWindow {
		s.recent = s.recent[1:]
	}
	return threshold > 0 && d > threshold, threshold
}
