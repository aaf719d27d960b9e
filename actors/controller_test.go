package actors

import (
	"math"
	"testing"

	"github.com/mgrpo/mgrpo/messages"
	"github.com/mgrpo/mgrpo/rewards"
)

// TestControllerStateTravelsWhole: a controller state survives its wire
// form unchanged, every field included, so the actor that owns it can send
// it whole and nothing is rebuilt on the other side.
func TestControllerStateTravelsWhole(t *testing.T) {
	meta := rewards.DefaultMetaController()
	meta.Enabled, meta.Method, meta.LR, meta.TauLR, meta.BetaLR = true, "analytic", 0.05, 0.01, 0.02
	meta.BetaGradClip, meta.UpdateInterval, meta.TruncationSteps, meta.UseHessian = 0.5, 3, 2, true
	fresh := rewards.NewControllerState(0.7, 0.03, meta)
	updated := fresh
	updated.TauLog, updated.TauEntropyEMA, updated.EntropyHistory = math.Log(0.7), 1.234, true
	updated.Meta.Controller.LastTauGrad, updated.Meta.Controller.LastBetaGrad = -0.25, 0.125
	for name, s := range map[string]rewards.ControllerState{"fresh": fresh, "after updates": updated} {
		m := controllerMessage(messages.NewMeta("run", 4, "b", 3), s)
		if got := controllerState(m); got != s {
			t.Errorf("%s: state %+v came back as %+v", name, s, got)
		}
	}
}
