package actors

import (
	"github.com/asynkron/protoactor-go/actor"

	"github.com/mgrpo/mgrpo/messages"
	"github.com/mgrpo/mgrpo/rewards"
)

// control updates the controllers once from one optimiser step's global
// statistics (DESIGN §3; rewards.Controllers.Update).
func control(c rewards.Controllers, cs rewards.ControllerState, st *messages.StepStats) rewards.ControllerState {
	cs, _ = c.Update(cs, rewards.ControllerInputs{
		Step: st.GetMeta().GetStep(), WeightEntropy: st.GetWeightEntropy(),
		PolicyEntropy: st.GetPolicyEntropy(), KL: st.GetKl(), LRScale: 1,
	})
	return cs
}

// stepStats are the statistics of a report that the controllers read.
func stepStats(r *messages.StepReport) *messages.StepStats {
	return &messages.StepStats{Meta: messages.DeriveMeta(r.GetMeta()), WeightEntropy: r.GetWeightEntropy(), Kl: r.GetKl(),
		PolicyEntropy: r.GetEntropy(), RewardMean: r.GetRewardMean()}
}

// controllerFromMessage rebuilds the controller state from its wire form.
func controllerFromMessage(m *messages.ControllerState, meta rewards.MetaController) rewards.ControllerState {
	s := rewards.NewControllerState(m.GetTau(), m.GetBeta(), meta)
	s.TauLog, s.TauEntropyEMA, s.EntropyHistory = m.GetTauLog(), m.GetTauEntropyEma(), m.GetVersion() > 0
	s.Meta.Controller.LastTauGrad, s.Meta.Controller.LastBetaGrad = m.GetLastTauGrad(), m.GetLastBetaGrad()
	return s
}

// controllerActor keeps the controller state: StepStats in, the new
// ControllerState out.
type controllerActor struct {
	settings rewards.Controllers
	state    rewards.ControllerState
	version  int64
}

// newControllerProps returns the props of the controller starting at state.
func newControllerProps(s rewards.Controllers, state rewards.ControllerState) *actor.Props {
	return actor.PropsFromProducer(func() actor.Actor { return &controllerActor{settings: s, state: state} })
}

// Receive implements actor.Actor.
func (a *controllerActor) Receive(c actor.Context) {
	if m, ok := c.Message().(*messages.StepStats); ok {
		a.state = control(a.settings, a.state, m)
		a.version++
		c.Respond(controllerMessage(m.GetMeta(), a.state, a.version))
	}
}
