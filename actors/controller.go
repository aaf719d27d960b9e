package actors

import (
	"github.com/asynkron/protoactor-go/actor"

	"github.com/mgrpo/mgrpo/messages"
	"github.com/mgrpo/mgrpo/rewards"
)

// control updates the controllers once from one optimiser step's global
// statistics (DESIGN §3; rewards.Controllers.Update) and returns the new
// state with what the update did.
func control(c rewards.Controllers, cs rewards.ControllerState, st *messages.StepStats) (rewards.ControllerState, *messages.ControllerUpdate) {
	cs, up := c.Update(cs, rewards.ControllerInputs{
		Step: st.GetMeta().GetStep(), WeightEntropy: st.GetWeightEntropy(),
		PolicyEntropy: st.GetPolicyEntropy(), KL: st.GetKl(), LRScale: 1,
	})
	return cs, &messages.ControllerUpdate{
		Meta: messages.DeriveMeta(st.GetMeta()), State: controllerMessage(st.GetMeta(), cs), MetaRan: up.MetaRan,
		HasTauGrad: up.Grads.HasTau, TauGrad: up.Grads.Tau, HasBetaGrad: up.Grads.HasBeta, BetaGrad: up.Grads.Beta,
	}
}

// controllerMessage is the wire form of a controller state: the whole of
// it, so controllerState(controllerMessage(m, s)) == s.
func controllerMessage(meta *messages.StepMeta, s rewards.ControllerState) *messages.ControllerState {
	c := s.Meta.Controller
	return &messages.ControllerState{
		Meta: messages.DeriveMeta(meta), Tau: s.Tau, Beta: s.Beta, TauLog: s.TauLog, TauEntropyEma: s.TauEntropyEMA,
		EntropyHistory: s.EntropyHistory,
		MetaController: &messages.MetaControllerState{
			Enabled: c.Enabled, Method: c.Method, LearningRate: c.LearningRate, TauLearningRate: c.TauLearningRate,
			BetaLearningRate: c.BetaLearningRate, BetaGradClip: c.BetaGradClip, UpdateInterval: c.UpdateInterval,
			Objective: c.Objective, AnalyticSteps: int32(c.AnalyticSteps), Optimizer: c.Optimizer,
			TruncationSteps: int32(c.TruncationSteps), UseHessian: c.UseHessian,
			LastTauGrad: c.LastTauGrad, LastBetaGrad: c.LastBetaGrad,
		},
	}
}

// controllerState reads a controller state back from its wire form.
func controllerState(m *messages.ControllerState) rewards.ControllerState {
	c := m.GetMetaController()
	return rewards.ControllerState{
		Tau: m.GetTau(), Beta: m.GetBeta(), TauLog: m.GetTauLog(), TauEntropyEMA: m.GetTauEntropyEma(),
		EntropyHistory: m.GetEntropyHistory(),
		Meta: rewards.MetaState{Version: rewards.ControllerStateVersion, Controller: rewards.MetaControllerState{
			Enabled: c.GetEnabled(), Method: c.GetMethod(), LearningRate: c.GetLearningRate(),
			TauLearningRate: c.GetTauLearningRate(), BetaLearningRate: c.GetBetaLearningRate(),
			BetaGradClip: c.GetBetaGradClip(), UpdateInterval: c.GetUpdateInterval(), Objective: c.GetObjective(),
			AnalyticSteps: int(c.GetAnalyticSteps()), Optimizer: c.GetOptimizer(),
			TruncationSteps: int(c.GetTruncationSteps()), UseHessian: c.GetUseHessian(),
			LastTauGrad: c.GetLastTauGrad(), LastBetaGrad: c.GetLastBetaGrad(),
		}},
	}
}

// controllerActor owns the controller state: StepStats in, ControllerUpdate
// (the whole new state) out.
type controllerActor struct {
	settings rewards.Controllers
	state    rewards.ControllerState
	tel      telemetry
}

// Receive implements actor.Actor.
func (a *controllerActor) Receive(c actor.Context) {
	if m, ok := c.Message().(*messages.StepStats); ok {
		_, span := a.tel.actorSpan(m.GetMeta(), spanControl, "controller")
		var up *messages.ControllerUpdate
		a.state, up = control(a.settings, a.state, m)
		span.SetAttributes(attrTau.Float64(a.state.Tau), attrBeta.Float64(a.state.Beta))
		endSpan(span, nil)
		c.Respond(up)
	}
}
