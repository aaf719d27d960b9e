package actors

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	oteltrace "go.opentelemetry.io/otel/trace"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/asynkron/protoactor-go/scheduler"
	"google.golang.org/protobuf/proto"

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
	// RequestTimeout bounds one request to one stage actor.
	RequestTimeout time.Duration
	// Retries is how many more times a timed-out request is sent, each
	// time to the next actor of the pool.
	Retries int
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

// ClusterOptions are what the coordinator of a learner node needs to
// admit worker nodes.
type ClusterOptions struct {
	// Join is the reply an admitted node gets: the run id, configuration,
	// tokenizer and model dimensions (Accepted is set by the coordinator).
	Join *messages.JoinReply
	// Build and Protocol must match a node's for it to join.
	Build    string
	Protocol int32
	// Seed is the address worker nodes give as --cluster.seeds.
	Seed string
	// Notice receives one-line notices: nodes joining and leaving, roles
	// missing while work waits.
	Notice io.Writer
	// NoticeEvery is how often a missing role is reported (default 5 s).
	NoticeEvery time.Duration
}

// pipelineOptionsOf reads the options of the single-process pipeline
// (role all) from the configuration.
func pipelineOptionsOf(d *Deps) PipelineOptions {
	return PipelineOptions{Generators: max(d.Cfg.Cluster.Generators, 1), RewardEvaluators: 1, ReferenceScorers: 1,
		RequestTimeout: d.Cfg.Cluster.RequestTimeout, Retries: 2, ChunkBytes: d.Cfg.Cluster.WeightChunkBytes}
}

// stageRequest asks the coordinator to spread parts over one stage's pool
// and answer with a stageReply.
type stageRequest struct {
	stage messages.Stage
	parts []any
}

// stageReply carries the replies in part order, or the stage's error.
type stageReply struct {
	replies []any
	err     error
}

// publishRequest asks the coordinator to hand new weights to every
// generator; the reply is a stageReply, sent as soon as the weights are
// on their way (a generator takes messages in order, so it uses them for
// any later work). The coordinator times their arrival (coordinatorStats).
type publishRequest struct {
	policy *gpu.Model
	ctx    context.Context // the step's trace, in this process
}

// statsRequest asks for the coordinator's counters (a coordinatorStats).
type statsRequest struct{}

// coordinatorStats are the coordinator's counters.
type coordinatorStats struct {
	reissued int         // parts sent again because their actor was lost
	lastSync SyncMeasure // the newest weight publication every remote generator acknowledged
}

// SyncMeasure is one weight publication to remote generators: the bytes
// sent and the time until the last of them had the weights in use.
type SyncMeasure struct {
	Version int64
	Bytes   int64
	Seconds float64
}

// tick is the coordinator's timer: report roles missing while work waits.
type tick struct{}

// workerNode is a registered worker node.
type workerNode struct {
	id, address string
	actors      []*actor.PID
}

// coordinator is the parent and supervisor of the local stage actors and
// the registrar of the remote ones: it spawns the local ones, restarts a
// panicking one and re-sends its work (resendStrategy), admits worker
// nodes and watches their actors, spreads each stage's parts over its
// pool with a timeout and bounded retries (pool.scatter), sends the parts
// of a lost actor again, and hands weights to the generators.
type coordinator struct {
	deps     *Deps
	models   Models
	ctrl     rewards.ControllerState
	opt      PipelineOptions
	pools    map[messages.Stage]*pool
	latest   *gpu.Model // the newest weights published to the generators (nil: none yet)
	nodes    map[string]*workerNode
	chunks   map[int64][]*messages.PolicyWeights // by version: the newest policy, and the reference as -1
	syncs    []*weightSync                       // weight publications waiting for their acks
	lastSync SyncMeasure                         // the newest acknowledged one
	stopping bool                                // the run is ending: stopped children stay stopped
	timer    *scheduler.TimerScheduler
}

// weightSync is one publication of new weights waiting for the remote
// generators to have them in use.
type weightSync struct {
	version int64
	start   time.Time
	bytes   int64
	span    oteltrace.Span
	waiting map[*actor.PID]oteltrace.Span // generators whose WeightsApplied has not come, with their spans
}

// referenceVersion keys the reference weights' chunks.
const referenceVersion = -1

// Receive implements actor.Actor.
func (a *coordinator) Receive(c actor.Context) {
	switch m := c.Message().(type) {
	case *actor.Started:
		a.spawn(c)
		if a.opt.Cluster != nil {
			a.timer = scheduler.NewTimerScheduler(c)
			every := a.opt.Cluster.NoticeEvery
			if every <= 0 {
				every = 5 * time.Second
			}
			a.timer.SendRepeatedly(every, every, c.Self(), tick{})
		}
	case *actor.Stopping:
		a.stopping = true
	case *actor.Terminated:
		a.terminated(c, m.Who)
	case *stageRequest:
		sender := c.Sender()
		a.pools[m.stage].scatter(c, m.parts, func(replies []any, err error) {
			c.Send(sender, &stageReply{replies: replies, err: err})
		})
	case *publishRequest:
		a.publish(c, m)
	case *statsRequest:
		c.Respond(&coordinatorStats{reissued: a.pools[messages.Stage_GENERATE].reissued +
			a.pools[messages.Stage_REWARD].reissued + a.pools[messages.Stage_REFERENCE].reissued, lastSync: a.lastSync})
	case *messages.JoinRequest:
		c.Respond(a.join(m))
	case *messages.Register:
		a.register(c, m)
	case *messages.Heartbeat:
		_, known := a.nodes[m.GetNodeId()]
		c.Respond(&messages.HeartbeatAck{Known: known})
	case tick:
		a.reportMissing()
	}
}

// spawn starts the local stage actors as children.
func (a *coordinator) spawn(c actor.Context) {
	d, o := a.deps, a.opt
	a.pools, a.nodes, a.chunks = map[messages.Stage]*pool{}, map[string]*workerNode{}, map[int64][]*messages.PolicyWeights{}
	newPool := func(stage messages.Stage, name string, n int, props func(id string) *actor.Props) {
		p := &pool{name: name, stage: stage, timeout: o.RequestTimeout, retries: o.Retries, tracer: d.Tracer, meter: d.Meter}
		if stage == messages.Stage_LEARN || stage == messages.Stage_CONTROL {
			// Stateful: a request that timed out is still in the mailbox and
			// will run, so a retry would apply the batch twice. No retry, and
			// a timeout ends the run instead of skipping the step.
			p.retries, p.stateful = 0, true
		}
		for i := range n {
			id := fmt.Sprintf("%s-%d", name, i)
			pr := props(id)
			pid, err := c.SpawnNamed(pr, id)
			if err != nil {
				panic(fmt.Sprintf("actors: spawn %s: %v", id, err)) // names are unique per coordinator
			}
			p.members = append(p.members, &member{pid: pid, props: pr})
		}
		a.pools[stage] = p
	}
	newPool(messages.Stage_GENERATE, "generator", o.Generators, func(id string) *actor.Props {
		var s Sampler = a.models.Policy
		if o.Wrap != nil {
			s = o.Wrap(id, s)
		}
		return newGeneratorProps(id, d, newPolicySlot(s))
	})
	a.pools[messages.Stage_GENERATE].need = o.MinGenerators
	newPool(messages.Stage_REWARD, "reward", o.RewardEvaluators, func(id string) *actor.Props {
		return newRewardProps(id, d)
	})
	newPool(messages.Stage_REFERENCE, "reference", o.ReferenceScorers, func(id string) *actor.Props {
		return newReferenceProps(id, d, a.models.Reference)
	})
	newPool(messages.Stage_LEARN, "learner", 1, func(string) *actor.Props {
		return newLearnerProps(a.models.Learner, d)
	})
	ctrl := &controllerActor{settings: controlSettingsOf(d), state: a.ctrl, deps: d} // the state's one owner from here on
	newPool(messages.Stage_CONTROL, "controller", 1, func(string) *actor.Props {
		return actor.PropsFromProducer(func() actor.Actor { return ctrl }) // one instance: state survives a restart
	})
}

// terminated handles a stopped actor: a local stage actor that its
// supervisor stopped after repeated failures (resendStrategy) is replaced
// by a fresh one, so the pool keeps its size for the rest of the run (a new
// generator is sent the newest weights); a worker node's actor (its
// process died or hung) leaves its pool. Either way its parts in flight
// are sent again at once.
func (a *coordinator) terminated(c actor.Context, who *actor.PID) {
	if a.stopping {
		return
	}
	for _, p := range a.pools {
		i := slices.IndexFunc(p.members, func(m *member) bool { return m.pid.Equal(who) })
		if i < 0 {
			continue
		}
		old := p.members[i]
		a.synced(c, who, errors.New("left the pool")) // it will not acknowledge weights any more
		if old.node != "" {
			p.remove(c, who)
			a.dropNode(c, old.node, fmt.Sprintf("its %s actor %s stopped", p.name, who.GetId()))
			return
		}
		p.replaced++
		id := fmt.Sprintf("%s-%d.%d", p.name, i, p.replaced)
		pid, err := c.SpawnNamed(old.props, id)
		if err != nil {
			c.Logger().Error("stage actor stopped and could not be replaced", "actor", who.Id, "err", err)
			p.remove(c, who)
			return
		}
		if p.stage == messages.Stage_GENERATE && a.latest != nil { // weights sent while it was down are lost
			c.Send(pid, &policySnapshot{model: a.latest})
		}
		p.replace(c, who, &member{pid: pid, props: old.props})
		c.Logger().Warn("stage actor stopped after repeated failures: replaced", "actor", who.Id, "by", id)
		return
	}
}

// dropNode forgets a worker node: every actor of it leaves its pool (its
// parts in flight go to the rest), and its next Heartbeat learns that it
// must join again.
func (a *coordinator) dropNode(c actor.Context, id, why string) {
	n, ok := a.nodes[id]
	if !ok {
		return
	}
	delete(a.nodes, id)
	for _, pid := range n.actors {
		c.Unwatch(pid)
		a.synced(c, pid, errors.New("its node left"))
		for _, p := range a.pools {
			p.remove(c, pid)
		}
	}
	a.notice("node %s at %s left (%s)", id, n.address, why)
}

// join answers a node's JoinRequest.
func (a *coordinator) join(m *messages.JoinRequest) *messages.JoinReply {
	cl := a.opt.Cluster
	refuse := func(format string, args ...any) *messages.JoinReply {
		reason := fmt.Sprintf(format, args...)
		a.notice("refused node %s at %s: %s", m.GetNodeId(), m.GetAddress(), reason)
		return &messages.JoinReply{Reason: reason}
	}
	switch {
	case cl == nil:
		return &messages.JoinReply{Reason: "this run takes no worker nodes"}
	case m.GetProtocol() != cl.Protocol:
		return refuse("protocol version %d, the learner speaks %d", m.GetProtocol(), cl.Protocol)
	case m.GetBuild() != cl.Build:
		return refuse("build %s, the learner runs %s: run the same mgrpo-node build on every node", m.GetBuild(), cl.Build)
	}
	if _, ok := a.models.Reference.(*gpu.Model); !ok && slices.Contains(m.GetRoles(), "reference") {
		return refuse("the learner has no reference weights to send")
	}
	reply := proto.CloneOf(cl.Join)
	reply.Accepted = true
	return reply
}

// register admits a node's stage actors: each is watched, sent the
// weights it needs (the newest policy to a generator, the reference to a
// reference scorer) ahead of any work, and added to its pool. A node that
// registers again (it was dropped, then came back) replaces its old entry.
func (a *coordinator) register(c actor.Context, m *messages.Register) {
	if a.opt.Cluster == nil {
		return
	}
	if _, ok := a.nodes[m.GetNodeId()]; ok {
		a.dropNode(c, m.GetNodeId(), "it registered again")
	}
	n := &workerNode{id: m.GetNodeId(), address: m.GetAddress()}
	var roles []string
	for _, sa := range m.GetActors() {
		p, ok := a.pools[sa.GetStage()]
		if !ok || p.stateful {
			continue
		}
		pid := actor.NewPID(m.GetAddress(), sa.GetId())
		c.Watch(pid) // a watch does not survive a reconnect: every registration watches afresh
		n.actors = append(n.actors, pid)
		switch sa.GetStage() {
		case messages.Stage_GENERATE:
			a.sendWeights(c, pid, a.latestChunks())
		case messages.Stage_REFERENCE:
			a.sendWeights(c, pid, a.referenceChunks())
		}
		p.add(c, &member{pid: pid, node: n.id})
		roles = append(roles, p.name)
	}
	a.nodes[n.id] = n
	c.Respond(&messages.Registered{NodeId: n.id})
	a.notice("node %s at %s joined: %s", n.id, n.address, strings.Join(roles, ", "))
}

// latestChunks are the chunks of the newest published policy (the
// starting one before any).
func (a *coordinator) latestChunks() []*messages.PolicyWeights {
	m := a.latest
	if m == nil {
		m, _ = a.models.Policy.(*gpu.Model)
	}
	if m == nil {
		return nil
	}
	return a.chunksOf(m, m.Version())
}

// referenceChunks are the chunks of the frozen reference.
func (a *coordinator) referenceChunks() []*messages.PolicyWeights {
	m, _ := a.models.Reference.(*gpu.Model)
	if m == nil {
		return nil
	}
	return a.chunksOf(m, referenceVersion)
}

// chunksOf cuts m into PolicyWeights chunks once per key (a version, or
// referenceVersion) and keeps only the newest policy's and the reference's.
func (a *coordinator) chunksOf(m *gpu.Model, key int64) []*messages.PolicyWeights {
	if ch, ok := a.chunks[key]; ok {
		return ch
	}
	meta := messages.NewMeta(a.deps.RunID, m.Version(), fmt.Sprintf("weights/%d", key), m.Version())
	ch, err := chunkModel(meta, m, max(a.opt.ChunkBytes, 4))
	if err != nil {
		panic(fmt.Sprintf("actors: chunk weights: %v", err)) // the model's own tensors always chunk
	}
	for k := range a.chunks {
		if k != referenceVersion {
			delete(a.chunks, k)
		}
	}
	a.chunks[key] = ch
	return ch
}

// sendWeights sends chunks to pid: all but the last as plain messages, the
// last as a request whose answer (WeightsApplied) says the weights are in
// use. The future is returned (nil for no chunks).
func (a *coordinator) sendWeights(c actor.Context, pid *actor.PID, chunks []*messages.PolicyWeights) *actor.Future {
	if len(chunks) == 0 {
		return nil
	}
	if pid.GetAddress() != c.Self().GetAddress() { // to another node
		a.deps.Meter.WeightsSent(chunkBytes(chunks))
	}
	for _, w := range chunks[:len(chunks)-1] {
		c.Send(pid, w)
	}
	return c.RequestFuture(pid, chunks[len(chunks)-1], a.opt.RequestTimeout)
}

// publish hands new weights to every generator: a local one gets the
// immutable in-memory model (or chunks with ChunkWeights), a remote one
// chunks. Both are sent by this actor before any later PromptBatch, so a
// generator always samples with the weights published before it was asked.
// The reply goes at once; the remote generators' WeightsApplied time the
// publication (lastSync). Not waiting for them keeps a generator that
// froze from holding up the step: it holds its next part instead, which is
// sent again when it is dropped.
func (a *coordinator) publish(c actor.Context, req *publishRequest) {
	policy := req.policy
	a.latest = policy
	c.Respond(&stageReply{})
	tr := a.deps.Tracer
	ctx, span := tr.Start(req.ctx, spanPublish, oteltrace.WithAttributes(attrVersion.Int64(policy.Version())))
	s := &weightSync{version: policy.Version(), start: time.Now(), span: span, waiting: map[*actor.PID]oteltrace.Span{}}
	a.syncs = append(a.syncs, s)
	for _, m := range a.pools[messages.Stage_GENERATE].members {
		if m.node == "" && !a.opt.ChunkWeights {
			c.Send(m.pid, &policySnapshot{model: policy})
			continue
		}
		chunks := a.chunksOf(policy, policy.Version())
		bytes := chunkBytes(chunks)
		s.bytes += bytes
		if f := a.sendWeights(c, m.pid, chunks); f != nil {
			pid := m.pid
			_, s.waiting[pid] = tr.Start(ctx, spanPublish+".generator", oteltrace.WithAttributes(attrActor.String(pid.GetId()),
				attrNode.String(nodeName(m)), attrBytes.Int64(bytes), attrChunks.Int(len(chunks))))
			version := policy.Version()
			c.ReenterAfter(f, func(res any, err error) { a.synced(c, pid, ackError(res, err, version)) })
		}
	}
	a.synced(c, nil, nil)
}

// synced notes that pid has the newest weights in use, failed to take
// them (err), or left the pool (nil: nothing but a check), and records
// every publication that waits for no one any more.
func (a *coordinator) synced(c actor.Context, pid *actor.PID, err error) {
	a.syncs = slices.DeleteFunc(a.syncs, func(s *weightSync) bool {
		for w, span := range s.waiting {
			if pid != nil && w.Equal(pid) {
				endSpan(span, err)
				delete(s.waiting, w)
			}
		}
		if len(s.waiting) > 0 {
			return false
		}
		s.span.SetAttributes(attrBytes.Int64(s.bytes))
		endSpan(s.span, nil)
		if s.bytes > 0 && s.version >= a.lastSync.Version {
			a.lastSync = SyncMeasure{Version: s.version, Bytes: s.bytes, Seconds: time.Since(s.start).Seconds()}
		}
		return true
	})
}

// ackError is what an answer to the last chunk of version says: nil for
// a WeightsApplied of that version, else why the weights are not in use.
func ackError(res any, err error, version int64) error {
	if err != nil {
		return err
	}
	switch m := res.(type) {
	case *messages.WeightsApplied:
		if m.GetVersion() != version {
			return fmt.Errorf("%s applied weights version %d, want %d", m.GetActor(), m.GetVersion(), version)
		}
		return nil
	case *messages.SkipNotice:
		return fromNotice(m)
	}
	return fmt.Errorf("answer %T to weights", res)
}

// chunkBytes is the tensor bytes of a weight snapshot.
func chunkBytes(chunks []*messages.PolicyWeights) int64 {
	var n int64
	for _, w := range chunks {
		for _, t := range w.GetTensors() {
			n += int64(len(t.GetData()))
		}
	}
	return n
}

// reportMissing writes one line naming the roles no node serves while
// their pool is empty.
func (a *coordinator) reportMissing() {
	var missing []string
	for _, s := range []messages.Stage{messages.Stage_GENERATE, messages.Stage_REWARD, messages.Stage_REFERENCE} {
		switch p := a.pools[s]; {
		case len(p.members) == 0:
			missing = append(missing, p.name)
		case len(p.members) < p.need:
			missing = append(missing, fmt.Sprintf("%s (%d of the %d actors to start with)", p.name, len(p.members), p.need))
		}
	}
	if len(missing) > 0 {
		a.notice("waiting for a node of role %s; start one with --cluster.seeds %s", strings.Join(missing, ", "), a.opt.Cluster.Seed)
	}
}

// notice writes one line to the cluster's notice writer.
func (a *coordinator) notice(format string, args ...any) {
	if a.opt.Cluster != nil && a.opt.Cluster.Notice != nil {
		fmt.Fprintf(a.opt.Cluster.Notice, format+"\n", args...)
	}
}

// actorStages runs each stage by asking the coordinator, which spreads
// the parts over the stage's actors. It is safe for concurrent use (the
// asynchronous runner produces and consumes at once).
type actorStages struct {
	sys   *actor.ActorSystem
	coord *actor.PID
}

// ask sends one request to the coordinator and waits for its reply or for
// ctx. There is no overall deadline: every request the coordinator sends
// has its own timeout, and parts wait, by design, while no actor serves
// their stage (worker nodes may come later).
func (s *actorStages) ask(ctx context.Context, msg any) (any, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	f := actor.NewFuture(s.sys, -1) // no timeout: see above
	s.sys.Root.RequestWithCustomSender(s.coord, msg, f.PID())
	return awaitFuture(ctx, f)
}

// awaitFuture returns f's result, or ctx's error as soon as ctx ends
// (the future's own wait goes on in the background, until its answer or
// its timeout).
func awaitFuture(ctx context.Context, f *actor.Future) (any, error) {
	done := make(chan struct{})
	var res any
	var err error
	go func() {
		res, err = f.Result()
		close(done)
	}()
	select {
	case <-done:
		return res, err
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// askStage asks for a stage reply.
func (s *actorStages) askStage(ctx context.Context, msg any) (*stageReply, error) {
	res, err := s.ask(ctx, msg)
	if err != nil {
		return nil, err
	}
	r, ok := res.(*stageReply)
	if !ok {
		return nil, fmt.Errorf("coordinator answered %T", res)
	}
	return r, r.err
}

// scatter asks for stage's parts to be done and returns the replies in
// part order, each of type Out.
func scatter[In, Out any](ctx context.Context, s *actorStages, stage messages.Stage, parts []In) ([]Out, error) {
	r, err := s.askStage(ctx, &stageRequest{stage: stage, parts: anys(parts)})
	if err != nil {
		return nil, err
	}
	return replies[Out](r)
}

func (s *actorStages) generate(ctx context.Context, parts []*messages.PromptBatch) ([]*messages.Rollouts, error) {
	return scatter[*messages.PromptBatch, *messages.Rollouts](ctx, s, messages.Stage_GENERATE, parts)
}

func (s *actorStages) score(ctx context.Context, parts []*messages.Rollouts) ([]*messages.Scored, error) {
	return scatter[*messages.Rollouts, *messages.Scored](ctx, s, messages.Stage_REWARD, parts)
}

func (s *actorStages) reference(ctx context.Context, parts []*messages.Scored) ([]*messages.RefScored, error) {
	return scatter[*messages.Scored, *messages.RefScored](ctx, s, messages.Stage_REFERENCE, parts)
}

func (s *actorStages) learn(ctx context.Context, pb *messages.PreparedBatch) (*messages.StepReport, *gpu.Model, error) {
	lr, err := first(scatter[*messages.PreparedBatch, *learnerReply](ctx, s, messages.Stage_LEARN, []*messages.PreparedBatch{pb}))
	if err != nil {
		return nil, nil, err
	}
	return lr.report, lr.policy, nil
}

func (s *actorStages) control(ctx context.Context, st *messages.StepStats) (*messages.ControllerUpdate, error) {
	return first(scatter[*messages.StepStats, *messages.ControllerUpdate](ctx, s, messages.Stage_CONTROL, []*messages.StepStats{st}))
}

func (s *actorStages) publish(ctx context.Context, policy *gpu.Model) error {
	_, err := s.askStage(ctx, &publishRequest{policy: policy, ctx: ctx})
	return err
}

func (s *actorStages) checkpoint(ctx context.Context, dir string) error {
	req := &messages.CheckpointRequest{Meta: messages.NewMeta("", 0, "checkpoint", 0), Dir: dir}
	done, err := first(scatter[*messages.CheckpointRequest, *messages.CheckpointDone](ctx, s, messages.Stage_LEARN, []*messages.CheckpointRequest{req}))
	if err != nil {
		return err
	}
	if done.GetError() != "" {
		return fmt.Errorf("learner: %s", done.GetError())
	}
	return nil
}

func (s *actorStages) stats(ctx context.Context) (int, SyncMeasure) {
	res, err := s.ask(ctx, &statsRequest{})
	if st, ok := res.(*coordinatorStats); ok && err == nil {
		return st.reissued, st.lastSync
	}
	return 0, SyncMeasure{}
}

// replies type-checks a stage's replies.
func replies[T any](r *stageReply) ([]T, error) {
	out := make([]T, len(r.replies))
	for i, x := range r.replies {
		v, ok := x.(T)
		if !ok {
			return nil, fmt.Errorf("part %d: reply %T, want %T: %w", i, x, out[i], messages.ErrShape)
		}
		out[i] = v
	}
	return out, nil
}

func anys[T any](x []T) []any {
	out := make([]any, len(x))
	for i, v := range x {
		out[i] = v
	}
	return out
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
// pipeline; Step(ctx, p.Trainer, n) then runs a step through the actors.
func StartPipeline(d *Deps, m Models, cs rewards.ControllerState, opt PipelineOptions, logw io.Writer) *Pipeline {
	p := StartPipelineOn(NewSystem(logw, d.MeterProvider), d, m, cs, opt)
	p.own = true
	return p
}

// StartPipelineOn is StartPipeline on an existing actor system (a learner
// node's, which worker nodes reach over the network).
func StartPipelineOn(sys *actor.ActorSystem, d *Deps, m Models, cs rewards.ControllerState, opt PipelineOptions) *Pipeline {
	if opt.RequestTimeout <= 0 {
		opt.RequestTimeout = 30 * time.Second
	}
	props := actor.PropsFromProducer(func() actor.Actor { return &coordinator{deps: d, models: m, ctrl: cs, opt: opt} },
		actor.WithSupervisor(newResendStrategy(5, time.Minute, 50*time.Millisecond)))
	coord, err := sys.Root.SpawnNamed(props, CoordinatorName)
	if err != nil {
		panic(fmt.Sprintf("actors: spawn coordinator: %v", err)) // one pipeline per system
	}
	st := &actorStages{sys: sys, coord: coord}
	return &Pipeline{sys: sys, coord: coord, Trainer: newTrainer(d, st, m, cs), unwatch: d.Meter.WatchSupervision(sys)}
}

// CoordinatorName is the coordinator's name in a learner node's actor
// system: worker nodes address it as actor.NewPID(learnerAddress,
// CoordinatorName).
const CoordinatorName = "coordinator"

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
