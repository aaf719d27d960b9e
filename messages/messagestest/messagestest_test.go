package messagestest

import (
	"testing"

	"github.com/mgrpo/mgrpo/messages"
)

// recorder is a testing.TB that records failures instead of failing.
type recorder struct {
	testing.TB
	failed bool
}

func (r *recorder) Helper()               {}
func (r *recorder) Errorf(string, ...any) { r.failed = true }

func TestFreeze(t *testing.T) {
	m := messages.NewMeta("run", 1, "b", 0)
	r := &recorder{TB: t}
	check := Freeze(r, m)
	check()
	if r.failed {
		t.Fatal("Freeze failed an unchanged message")
	}
	m.Trace["traceparent"] = "x"
	check()
	if !r.failed {
		t.Error("Freeze did not notice a change to the trace map")
	}
}
