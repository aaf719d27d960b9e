package actors

import (
	"time"

	"github.com/asynkron/protoactor-go/actor"
)

// resendStrategy supervises the stage pools (generators, reward
// evaluators, the reference scorer): a child that panics is restarted after
// a backoff growing with its recent failures, and the message it failed on
// is sent to it again, so whoever requested the work still gets an answer
// (the envelope keeps the requester as sender). A child that fails more
// than maxRestarts times within window is stopped; requests to it then come
// back as dead letters and the coordinator retries or skips the batch.
type resendStrategy struct {
	maxRestarts int
	window      time.Duration
	backoff     time.Duration
}

var _ actor.SupervisorStrategy = (*resendStrategy)(nil)

// newResendStrategy returns the strategy with the given bounds.
func newResendStrategy(maxRestarts int, window, backoff time.Duration) *resendStrategy {
	return &resendStrategy{maxRestarts: maxRestarts, window: window, backoff: backoff}
}

// HandleFailure implements actor.SupervisorStrategy.
func (s *resendStrategy) HandleFailure(sys *actor.ActorSystem, sup actor.Supervisor, child *actor.PID, rs *actor.RestartStatistics, reason, message any) {
	if rs.NumberOfFailures(s.window) == 0 {
		rs.Reset()
	}
	rs.Fail()
	if rs.NumberOfFailures(s.window) > s.maxRestarts {
		sys.EventStream.Publish(&actor.SupervisorEvent{Child: child, Reason: reason, Directive: actor.StopDirective})
		sup.StopChildren(child)
		return
	}
	delay := time.Duration(rs.FailureCount()) * s.backoff
	time.AfterFunc(delay, func() {
		sys.EventStream.Publish(&actor.SupervisorEvent{Child: child, Reason: reason, Directive: actor.RestartDirective})
		sup.RestartChildren(child)
		if _, system := message.(actor.SystemMessage); message != nil && !system {
			sys.Root.Send(child, message)
		}
	})
}
