package actors

import (
	"testing"
	"time"
)

func TestSlowSteps(t *testing.T) {
	ms := time.Millisecond
	fixed := slowSteps{fixed: 100 * ms}
	if slow, _ := fixed.observe(99 * ms); slow {
		t.Error("99 ms marked slow against 100 ms")
	}
	if slow, _ := fixed.observe(101 * ms); !slow {
		t.Error("101 ms not marked slow against 100 ms")
	}
	auto := slowSteps{auto: true}
	for i, d := range []time.Duration{10, 500, 11, 9, 10} { // too few steps to judge, even 500
		if slow, _ := auto.observe(d * ms); slow {
			t.Errorf("step %d (%v) marked slow before %d steps", i, d*ms, slowMinSteps)
		}
	}
	// previous steps 10 500 11 9 10: median 10 ms; twice it is 20 ms, but
	// a step must also be 50 ms above it: threshold 60 ms
	if slow, th := auto.observe(21 * ms); slow || th != 60*ms {
		t.Errorf("21 ms: slow %v at threshold %v, want not slow at 60 ms", slow, th)
	}
	// with 21 ms among them the median is 11 ms: threshold 61 ms
	if slow, th := auto.observe(62 * ms); !slow || th != 61*ms {
		t.Errorf("62 ms: slow %v at threshold %v, want slow at 61 ms", slow, th)
	}
	for range 2 * slowWindow { // the window forgets old steps
		auto.observe(100 * ms)
	}
	if slow, th := auto.observe(150 * ms); slow || th != 200*ms {
		t.Errorf("after 100 ms steps: slow %v at %v, want not slow at 200 ms", slow, th)
	}
	var off slowSteps
	if slow, _ := off.observe(time.Hour); slow {
		t.Error("the zero value marked a step slow")
	}
}
