package actors

import (
	"fmt"
	"math"
	"math/rand/v2"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/mgrpo/mgrpo/messages"
	"github.com/mgrpo/mgrpo/rewards/tasks"
)

// rewardSettings is what the reward stage reads besides the rollouts.
type rewardSettings struct {
	fns []tasks.Weighted
	// shuffleSeed, when non-zero, permutes the completions' reward rows
	// within the batch with a stream seeded from it and the step: the
	// control run that shows learning comes from the reward.
	shuffleSeed uint64
}

// score runs every reward function on the completions of ro and returns
// what they say, raw (spec §1.2): everything derived from it is
// rewards.Prepare's. A reward of ±Inf, or a completion with no finite
// reward at all, is unusable: ErrNonFiniteReward.
func score(s rewardSettings, ro *messages.Rollouts) (*messages.Scored, error) {
	return scoreTimed(s, ro, nil)
}

// scoreTimed is score that reports each reward function's call to timed
// (nil: none), for spans.
func scoreTimed(s rewardSettings, ro *messages.Rollouts, timed func(name string, end time.Time, d time.Duration)) (*messages.Scored, error) {
	step := ro.GetMeta().GetStep()
	if err := messages.CheckRollouts(ro); err != nil {
		return nil, fmt.Errorf("score step %d: %w", step, err)
	}
	n := len(ro.GetRollouts())
	completions, answers := make([]string, n), make([]string, n)
	for i, r := range ro.GetRollouts() {
		completions[i], answers[i] = r.GetText(), ro.GetPrompts()[r.GetPromptIndex()].GetAnswer()
	}
	rows := make([][]float64, n) // [rollout][function]
	names, weights := make([]string, len(s.fns)), make([]float64, len(s.fns))
	for j, f := range s.fns {
		names[j], weights[j] = f.Name, f.Weight
		start := time.Now()
		for i, v := range f.Fn(completions, answers) {
			rows[i] = append(rows[i], v)
		}
		if timed != nil {
			timed(f.Name, time.Now(), time.Since(start))
		}
	}
	if err := checkRewardRows(rows); err != nil {
		return nil, fmt.Errorf("score step %d: %w", step, err)
	}
	if s.shuffleSeed != 0 {
		rng := rand.New(rand.NewPCG(s.shuffleSeed, uint64(step)))
		rng.Shuffle(n, func(i, j int) { rows[i], rows[j] = rows[j], rows[i] })
	}
	return messages.NewScored(messages.DeriveMeta(ro.GetMeta()), ro, names, weights, rows)
}

// checkRewardRows rejects ±Inf rewards and completions without any finite
// reward (NaN alone means "no opinion" and counts 0, spec §1.2).
func checkRewardRows(rows [][]float64) error {
	for i, row := range rows {
		finite := false
		for j, v := range row {
			if math.IsInf(v, 0) {
				return fmt.Errorf("completion %d reward %d = %v: %w", i, j, v, ErrNonFiniteReward)
			}
			finite = finite || !math.IsNaN(v)
		}
		if !finite {
			return fmt.Errorf("completion %d has no finite reward: %w", i, ErrNonFiniteReward)
		}
	}
	return nil
}

// rewardActor answers Rollouts with Scored (or a SkipNotice), and a Relay
// by handing the Scored to the reference scorer it names, beside it, as a
// request from the relay's sender.
type rewardActor struct {
	id       string
	settings rewardSettings
	tel      telemetry
}

// newRewardProps returns the props of reward evaluator id.
func newRewardProps(id string, s rewardSettings, tel telemetry) *actor.Props {
	return actor.PropsFromProducer(func() actor.Actor { return &rewardActor{id: id, settings: s, tel: tel} })
}

// Receive implements actor.Actor.
func (a *rewardActor) Receive(c actor.Context) {
	switch m := c.Message().(type) {
	case *messages.Rollouts:
		sc, err := a.score(m)
		respond(c, a.tel.meter, m.GetMeta(), a.id, messages.Stage_REWARD, sc, err)
	case *messages.Relay:
		sc, err := a.score(m.GetRollouts())
		if err != nil {
			respond(c, a.tel.meter, m.GetMeta(), a.id, messages.Stage_REWARD, nil, err)
			return
		}
		a.tel.meter.Part("reward", false)
		c.RequestWithCustomSender(actor.NewPID(c.Self().GetAddress(), m.GetNext()), sc, c.Sender())
	}
}

// score scores ro in the actor's span, with a child span per reward
// function.
func (a *rewardActor) score(ro *messages.Rollouts) (*messages.Scored, error) {
	ctx, span := a.tel.actorSpan(ro.GetMeta(), spanReward+".part", a.id, attrSamples.Int(len(ro.GetRollouts())))
	sc, err := scoreTimed(a.settings, ro, func(name string, end time.Time, d time.Duration) {
		childSpan(ctx, a.tel.tracer, spanReward+".function", end, d, attrFunction.String(name))
	})
	endSpan(span, err)
	return sc, err
}
