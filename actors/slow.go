package actors

import (
	"slices"
	"time"
)

// slowWindow is how many recent steps the automatic threshold looks at,
// slowMinSteps how many it needs before it judges, and slowMinExtra the
// least time above their median it marks: a 30 ms step after 12 ms ones
// (an evaluation, another process on the core) is not worth a line.
const (
	slowWindow   = 50
	slowMinSteps = 5
	slowMinExtra = 50 * time.Millisecond
)

// slowSteps tells slow steps apart (trace.slow_step): slower than a fixed
// threshold, or, with auto, than twice the median of the previous
// slowWindow steps and slowMinExtra more than it. The zero value marks
// nothing.
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
		median := sorted[len(sorted)/2]
		threshold = max(2*median, median+slowMinExtra)
	}
	s.recent = append(s.recent, d)
	if len(s.recent) > slowWindow {
		s.recent = s.recent[1:]
	}
	return threshold > 0 && d > threshold, threshold
}
