package actors

import "testing"

// TestCadence: which outputs a step writes by the clock alone; the last
// step always writes its metrics line and, with evaluations on, evaluates
// (the final accuracy is then in the metrics), and never checkpoints
// here (the run checkpoints its last step itself).
func TestCadence(t *testing.T) {
	c := cadence{log: 5, samples: 4, eval: 3, checkpoint: 2, steps: 10}
	off := cadence{steps: 10}
	for _, tc := range []struct {
		c    cadence
		step int
		want due
	}{
		{c, 1, due{}},
		{c, 2, due{checkpoint: true}},
		{c, 3, due{eval: true}},
		{c, 4, due{samples: true, checkpoint: true}},
		{c, 5, due{metrics: true}},
		{c, 6, due{eval: true, checkpoint: true}},
		{c, 8, due{samples: true, checkpoint: true}},
		{c, 9, due{eval: true}},
		{c, 10, due{metrics: true, eval: true}}, // the last: evaluated although 3 does not divide it, not checkpointed
		{off, 5, due{}},
		{off, 10, due{metrics: true}}, // evaluations off: the last step does not evaluate either
	} {
		if got := tc.c.at(tc.step); got != tc.want {
			t.Errorf("%+v.at(%d) = %+v, want %+v", tc.c, tc.step, got, tc.want)
		}
	}
}
