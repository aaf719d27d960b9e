package actors

import (
	"math"

	"github.com/mgrpo/mgrpo/actors/runlog"
	"github.com/mgrpo/mgrpo/gpu/loss"
	"github.com/mgrpo/mgrpo/internal/tokenizer"
	"github.com/mgrpo/mgrpo/messages"
	"github.com/mgrpo/mgrpo/rewards"
)

// policyMetrics are twinkle's GRPOMetric diagnostics of a learner step
// (rewards.PolicyMetrics, spec §3.3), computed once, by the learner, over
// the whole batch: lp and ent are the forward pass's log-probs and
// entropies laid out as lb, old the rollouts' behaviour log-probs, at the
// sampling temperature, with the clip rule and ε of the loss in use. nil
// when no token counts or a counted value is not finite (the loss reports
// that step).
func policyMetrics(s learnSettings, lb loss.Batch, ro *messages.Rollouts, lp, ent []float64) *messages.PolicyMetrics {
	tb := rewards.TokenBatch{N: lb.N, T: lb.T, NewLogp: lp, Entropy: ent, Mask: lb.Mask, Advantages: lb.Advantages,
		TokenIDs: make([]int, lb.N*lb.T)}
	if len(ent) != len(lp) {
		tb.Entropy = nil
	}
	whole := true
	for i, r := range ro.GetRollouts() {
		whole = whole && len(r.GetLogp()) == len(r.GetTokenIds())
		for t, id := range r.GetTokenIds() {
			tb.TokenIDs[i*lb.T+t] = int(id)
		}
	}
	if whole {
		tb.OldLogp = padTokens(behaviourRows(ro), lb.T)
	}
	cfg := rewards.PolicyMetricsConfig{EpsilonLow: s.loss.Epsilon, EpsilonHigh: s.loss.EpsilonHigh,
		Temperature: s.temperature, TopKKL: s.topKKL, Variant: policyVariant(s.loss.Policy)}
	st, err := rewards.PolicyMetrics(tb, cfg)
	if err != nil || st.Tokens == 0 {
		return nil
	}
	return policyMessage(st)
}

// policyVariant is the clip counting rule of a loss.Config.Policy.
func policyVariant(policy string) rewards.PolicyLossVariant {
	switch policy {
	case loss.PolicyGSPO:
		return rewards.PolicyLossGSPO
	case loss.PolicyCISPO:
		return rewards.PolicyLossCISPO
	}
	return rewards.PolicyLossGRPO
}

// policyMessage is the wire form of policy statistics.
func policyMessage(st rewards.PolicyStats) *messages.PolicyMetrics {
	m := &messages.PolicyMetrics{
		Tokens: int64(st.Tokens), MeanNewLogp: st.MeanNewLogp, HasOld: st.HasOld, MeanOldLogp: st.MeanOldLogp,
		LogpDiffMean: st.LogpDiffMean, ApproxKl: st.ApproxKL, TokenKlMax: st.TokenKLMax, TokenRatioMax: st.TokenRatioMax,
		HasEntropy: st.HasEntropy, Entropy: st.Entropy, HasClip: st.HasClip, ClipRatioLow: st.ClipRatioLow, ClipRatioHigh: st.ClipRatioHigh,
	}
	for _, h := range st.HighKL {
		m.HighKl = append(m.HighKl, &messages.HighKLToken{Completion: int32(h.Seq), Position: int32(h.Pos), TokenId: int32(h.TokenID),
			Kl: h.KL, Ratio: h.Ratio, LogpNew: h.LogpNew, LogpOld: h.LogpOld, Advantage: h.Advantage})
	}
	return m
}

// policyStats reads policy statistics back from their wire form (nil for
// nil); policy_confidence and clip_ratio are derived again.
func policyStats(m *messages.PolicyMetrics) *rewards.PolicyStats {
	if m == nil {
		return nil
	}
	st := &rewards.PolicyStats{
		Tokens: int(m.GetTokens()), MeanNewLogp: m.GetMeanNewLogp(), PolicyConfidence: math.Exp(m.GetMeanNewLogp()),
		HasOld: m.GetHasOld(), MeanOldLogp: m.GetMeanOldLogp(), LogpDiffMean: m.GetLogpDiffMean(), ApproxKL: m.GetApproxKl(),
		TokenKLMax: m.GetTokenKlMax(), TokenRatioMax: m.GetTokenRatioMax(), HasEntropy: m.GetHasEntropy(), Entropy: m.GetEntropy(),
		HasClip: m.GetHasClip(), ClipRatioLow: m.GetClipRatioLow(), ClipRatioHigh: m.GetClipRatioHigh(),
		ClipRatio: m.GetClipRatioLow() + m.GetClipRatioHigh(),
	}
	for _, h := range m.GetHighKl() {
		st.HighKL = append(st.HighKL, rewards.HighKLToken{Seq: int(h.GetCompletion()), Pos: int(h.GetPosition()), TokenID: int(h.GetTokenId()),
			KL: h.GetKl(), Ratio: h.GetRatio(), LogpNew: h.GetLogpNew(), LogpOld: h.GetLogpOld(), Advantage: h.GetAdvantage()})
	}
	return st
}

// highKLTables are the sample file's extra table of a step's top_k_kl
// tokens (runlog.HighKLColumns), or none when the learner recorded none.
func highKLTables(tok tokenizer.Tokenizer, out *Outcome) []runlog.SampleTable {
	high := out.Report.GetPolicyMetrics().GetHighKl()
	if len(high) == 0 {
		return nil
	}
	ro := out.Scored.GetRollouts()
	k := max(int(ro.GetNumGenerations()), 1)
	rows := make([][]any, 0, len(high))
	for _, h := range high {
		c := int(h.GetCompletion())
		text := ""
		if c >= 0 && c < len(ro.GetRollouts()) {
			text = ro.GetRollouts()[c].GetText()
		}
		rows = append(rows, []any{c / k, c % k, int(h.GetPosition()), int(h.GetTokenId()), tokenText(tok, int(h.GetTokenId())),
			h.GetKl(), h.GetRatio(), h.GetLogpOld(), h.GetLogpNew(), h.GetAdvantage(), text})
	}
	return []runlog.SampleTable{{Name: runlog.HighKLTable, Columns: runlog.HighKLColumns(), Rows: rows}}
}

// tokenText is the text of one token id: "<eos>" for EOS, "" without a
// tokenizer.
func tokenText(tok tokenizer.Tokenizer, id int) string {
	switch {
	case tok == nil:
		return ""
	case id == tok.EOS():
		return "<eos>"
	}
	return tok.Decode([]int{id})
}
