package actors

import (
	"github.com/asynkron/protoactor-go/actor"

	"github.com/mgrpo/mgrpo/messages"
	"github.com/mgrpo/mgrpo/rewards"
)

// controlSettings are the tau, beta and meta controllers (spec §2).
type controlSettings struct {
	tau      rewards.TauController
	beta     rewards.BetaController
	meta     rewards.MetaController
	klTarget float64 // the meta-controller's KL target (controller.beta.kl_target)
}

// control updates the controllers once from one optimiser step's global
// statistics (DESIGN §3): the meta-controller when it is enabled (on its
// interval), else the beta then the tau controller, as the original's
// step order does (spec §1.9c).
func control(s controlSettings, cs rewards.ControllerState, st *messages.StepStats) rewards.ControllerState {
	step := st.GetMeta().GetStep()
	if s.meta.Enabled {
		if !s.meta.ShouldRun(step) {
			return cs
		}
		sig := rewards.MetaSignals{Entropy: st.GetWeightEntropy(), TargetEntropy: s.tau.TargetAt(step), KL: st.GetKl(), KLTarget: s.klTarget}
		if g, ok := s.meta.BuildObjective(nil).Gradients(sig); ok {
			cs = s.meta.Apply(cs, g, 1, s.tau.Min, s.tau.Max)
		}
		return cs
	}
	cs.Beta = s.beta.Update(cs.Beta, st.GetKl())
	cs, _ = s.tau.Update(cs, st.GetWeightEntropy(), step, 1)
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
	settings controlSettings
	state    rewards.ControllerState
	version  int64
}

// newControllerProps returns the props of the controller starting at state.
func newControllerProps(s controlSettings, state rewards.ControllerState) *actor.Props {
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
