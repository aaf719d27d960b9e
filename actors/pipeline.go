package actors

import (
	"fmt"
	"io"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"go.opentelemetry.io/otel/metric"

	"github.com/mgrpo/mgrpo/gpu"
	"github.com/mgrpo/mgrpo/messages"
	"github.com/mgrpo/mgrpo/rewards"
)

// PipelineOptions size and time the actor pipeline.
type PipelineOptions struct {
	// Generators, RewardEvaluators and ReferenceScorers are the local pool
	// sizes: actors of this process. A pool of size 0 is filled only by
	// worker nodes (Cluster).
	Generators, RewardEvaluators, ReferenceScorers int
	// MinGenerators holds the first generation until the generator pool
	// has this many actors, local and remote (≤ 1: until it has one).
	MinGenerators int
	// RequestTimeout, when set, bounds one request to one stage actor.
	RequestTimeout time.Duration
	// Timeouts, when RequestTimeout is not set, bounds one request to one
	// actor of each stage it names (Stage_SYNC: a weight publication's
	// acknowledgement), and 30 s those it does not.
	Timeouts map[messages.Stage]time.Duration
	// Retries is how many more times a timed-out request is sent, each
	// time to the next actor of the pool.
	Retries int
	// Hedge sends a part that runs long on one node to an idle actor of
	// another node as well (hedge.go).
	Hedge bool
	// ChunkWeights sends weights to local generators as PolicyWeights
	// chunks of ChunkBytes, as across a network, instead of in-memory
	// snapshots (remote generators always get chunks).
	ChunkWeights bool
	ChunkBytes   int
	// Wrap, if set, wraps each generator's sampler (fault injection in tests).
	Wrap func(id string, s Sampler) Sampler
	// Cluster, if set, lets worker nodes join the run and fill the pools.
	Cluster *ClusterOptions
}

// timeout is how long one request to an actor of stage may take.
func (o PipelineOptions) timeout(stage messages.Stage) time.Duration {
	if o.RequestTimeout > 0 {
		return o.RequestTimeout
	}
	if t, ok := o.Timeouts[stage]; ok {
		return t
	}
	return minTimeout
}

// runEnv is what the wiring (Run) opened for a run besides its settings:
// the run's id (its directory's name), where its actors report, and the
// device its models run on (model.device). The wiring closes each when the
// run ends; the pipeline only uses them.
type runEnv struct {
	id      string
	tel     telemetry
	device  gpu.Device
	metrics metric.MeterProvider // proto.actor's own actor metrics (nil: off)
}

// Pipeline is a running actor system with a coordinator and its stage
// actors, and the Trainer that drives them.
type Pipeline struct {
	Trainer *Trainer
	sys     *actor.ActorSystem
	coord   *actor.PID
	own     bool   // the system is the pipeline's own: Stop shuts it down
	unwatch func() // stops counting the system's actor failures
}

// StartPipeline starts the actors of one run on a new actor system (its
// own log lines to logw at WARN, nil discards them) and returns the
// pipeline; Step(ctx, p.Trainer, n, inOrder) then runs a step through the
// actors.
func StartPipeline(s *settings, env runEnv, m Models, cs rewards.ControllerState, opt PipelineOptions, logw io.Writer) *Pipeline {
	p := StartPipelineOn(NewSystem(logw, env.metrics), s, env, m, cs, opt)
	p.own = true
	return p
}

// StartPipelineOn is StartPipeline on an existing actor system (a learner
// node's, which worker nodes reach over the network).
func StartPipelineOn(sys *actor.ActorSystem, s *settings, env runEnv, m Models, cs rewards.ControllerState, opt PipelineOptions) *Pipeline {
	newCoordinator := func() actor.Actor {
		return &coordinator{
			supervisor: &supervisor{opt: opt, stages: s.stages, learn: s.learn, control: s.control, tel: env.tel,
				device: env.device, models: m, state: cs},
			members: &membership{opt: opt.Cluster},
			weights: &publisher{runID: env.id, start: m.Policy, reference: m.Reference, chunked: opt.ChunkWeights,
				chunkSize: opt.ChunkBytes, timeout: opt.timeout(messages.Stage_SYNC), tel: env.tel, blobs: opt.Cluster.blobs()},
		}
	}
	props := actor.PropsFromProducer(newCoordinator, actor.WithSupervisor(newResendStrategy(5, time.Minute, 50*time.Millisecond)))
	coord, err := sys.Root.SpawnNamed(props, CoordinatorName)
	if err != nil {
		panic(fmt.Sprintf("actors: spawn coordinator: %v", err)) // one pipeline per system
	}
	st := &actorStages{sys: sys, coord: coord}
	return &Pipeline{sys: sys, coord: coord, Trainer: newTrainer(s.step, env.id, env.tel.tracer, st, m, cs),
		unwatch: env.tel.meter.WatchSupervision(sys)}
}

// Stop stops every actor (and the system, when it is the pipeline's own).
func (p *Pipeline) Stop() {
	p.unwatch()
	// The coordinator stops after its children, each after the message it
	// is on: a checkpoint the learner is still writing (its request timed
	// out) is finished, not cut off, before Stop returns.
	_ = p.sys.Root.StopFuture(p.coord).Wait()
	if p.own {
		p.sys.Shutdown()
	}
}
