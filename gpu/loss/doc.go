// Package loss holds the policy losses of the GRPO family and of MaxEnt-GRPO
// as pure functions on flat float64 slices (spec §1.9, DESIGN §3).
//
// The model computes, for N sequences padded to T completion tokens, the
// per-token log-probs lp [N·T] and entropies H [N·T] under the current
// policy (logits already divided by the sampling temperature). A loss
// function returns the scalar loss and its gradients dLoss/dlp (DLogp) and
// dLoss/dH (DEntropy, nil when the loss has no entropy term), which the
// model backpropagates, plus Stats for metrics. Row i of every [N·T] slice
// is sequence i: index i·T + t.
//
//	Policy(cfg, b, lp)                         GRPO / GSPO / CISPO, chosen by cfg.Policy
//	MaxEntEntropy(cfg, b, lp, H, alpha, V)     policy loss − alpha·entropy basis (§1.9a)
//	Listwise(cfg, b, lp)                       listwise MaxEnt cross-entropy (§1.9b)
//	Supervised(b, lp)                          token-mean −lp (warm start)
//	ResolveAlpha(ctl, alpha, kl)               KL-adaptive alpha (§1.9a)
//
// Gradients are exactly those autograd gives for the same expression:
// zero where a clamp is active (torch.clamp passes the gradient on the
// closed interval), min() picks its smaller branch and splits ties evenly,
// detached factors carry no gradient. Tokens with mask 0 are skipped (their
// lp may be anything, even -Inf) and get zero gradient.
//
// # Invariants
//
// No function modifies its inputs; every output slice is new. Shapes are
// checked (ErrShape); values are not.
//
// It imports only the standard library; it never imports the model, actors,
// messages or rewards.
//
// Example:
//
//	cfg := loss.Default()
//	res, err := loss.Policy(cfg, loss.Batch{N: n, T: t, Mask: m, OldLogp: old, Advantages: adv}, lp)
//	// backpropagate res.DLogp through the model
package loss
