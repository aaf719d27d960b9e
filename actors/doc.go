// Package actors runs training: the proto.actor actors of a run (the
// coordinator, a pool of generators, a pool of reward evaluators, the
// reference scorer, the learner and the controller), the plain-function
// step they implement, the supervised warm start, and Run, the local
// all-actors trainer behind `mgrpo-node --role all`.
//
// # One step
//
// Step (step.go) is the whole step written once, in order, as plain calls,
// and what every run executes for every step (role all or a cluster,
// synchronous or asynchronous):
//
//	PromptBatch → generate → Rollouts → score → Scored → referenceScore →
//	RefScored → prepare → PreparedBatch → learn → StepReport (the new
//	weights on their way to the generators) → control → ControllerUpdate.
//
// Each stage is a plain function taking a message and returning a new
// one (generate in generator.go, score in reward.go, referenceScore in
// reference.go, prepare in prepare.go, learn in learner.go, control in
// controller.go). Without dynamic sampling the batch that is generated is
// the batch that is scored and reference-scored, so generate, score and
// referenceScore take each part in one pass (generateReference): a part's
// Rollouts go straight on to a reward evaluator and its Scored to a
// reference scorer (a part that comes back with a group incomplete sends
// the batch through the stages one after another: scoreReference). A Trainer runs them through a stages value: directly
// (NewTrainer, localStages) or through the actors (StartPipeline,
// actorStages), whose Receive methods are a type switch calling the same
// functions. Generation, rewards and reference scoring take a step's
// batch in parts of train.prompts_per_part prompts, whichever driver runs
// them, so a part's result never depends on which actor did it or how many
// shared the work; in synchronous mode both drivers give bit-identical
// outcomes (TestPipelineMatchesStep, with 1 or 3 generators).
//
// A run (drive.go) starts each step's Step and hands it a queue as its
// pace: batches are made in step order and steps learn and are recorded
// in step order, up to batchesAhead steps at once; the queue records each
// step (record.go) before the next may learn. Step called in a loop with
// inOrder is the same step without the overlap (TestDriveMatchesStep).
//
// # Settings and the wiring
//
// Run and Serve are the wiring: they resolve the configuration once
// (settings.go: newSettings, workerStages) into per-role settings, and
// open and close what a run holds (the device, the tracer and metrics, a
// node's ports, the run directory). Each stage actor gets its stage's
// settings, the process's telemetry and, where it runs a model, the device
// (model.device); the trainer gets stepSettings, the runner its record
// cadence. Settings are complete when built and never change; only the
// wiring (settings.go, run.go, worker.go, rundir.go, preflight.go,
// memory.go, cluster.go) reads the configuration.
//
// # Who owns what
//
//   - The reward stage says what the reward functions say (raw values);
//     prepare (rewards.Prepare) derives everything else from them, once.
//   - The learner actor owns the policy weights and the optimiser: it
//     answers a PreparedBatch with a report and a read-only snapshot, and a
//     CheckpointRequest by writing them. Nothing else touches the Learner.
//   - The controller actor owns the controller state and answers each
//     StepStats with the whole new state (ControllerUpdate); the Trainer
//     keeps the last one it was sent and writes controller_state.json from
//     it.
//   - The runner (run.go, rundir.go, record.go, warmstart.go) owns the run
//     directory and what is recorded; it reaches models and controller only
//     through the Trainer, which holds only what the actors sent.
//
// # Actors and supervision
//
// The coordinator (coordinator.go) is the one actor the trainer talks to;
// it holds each stage's pool and three parts, each with its own state:
// supervision (supervision.go), membership (membership.go) and weight
// publication (publish.go). It spreads a stage's parts over the stage's
// pool (pool.scatter), each request with a
// timeout and bounded retries on the next pool member, so a step never
// waits forever. A part that goes on to a second stage
// (pool.scatterThen: the reward evaluators' Scored to the reference
// scorers) is relayed by its member to a member of the second stage beside
// it, on its node or in this process (a Relay: both stages in one trip),
// or, with none there, sent on by the coordinator once answered. A
// generator's part is relayed likewise through two stages (pool.relayTo:
// a Chain to a reward evaluator on any node with a reference scorer
// beside it), or, with no such pair, answered by the generator. The learner and the controller get no retries: a request
// to them that timed out may still run, so it ends the run (ErrNoAnswer)
// rather than skipping the step or applying a batch twice. A panicking
// stage actor is restarted with a backoff and the message it failed on is
// re-sent (resendStrategy); one that fails more than 5 times a minute is
// stopped and the supervisor starts a fresh one in its place
// (supervisor.replace), so pools keep their size for the whole run; a
// stage that returns unusable data answers a SkipNotice and the batch is
// skipped with that reason (SkipError), as the original's _SkipBatch.
//
// # Nodes
//
// With --role learner the same pipeline runs on a learner node
// (actors/node) whose pools start empty, or hold local actors for the
// other roles it also has; worker nodes (Serve, worker.go) find it
// through cluster membership, join (JoinRequest: same build and protocol;
// the reply carries the configuration, tokenizer and model dimensions),
// start their stage actors and Register them. The coordinator does not
// care where a member lives: local or remote, it is a PID in a pool. For a
// remote member it adds what a network needs:
//
//   - a Watch on every registered actor (re-armed at every registration:
//     a watch does not survive a reconnect); Terminated drops the node and
//     sends its parts in flight, and those relayed to its actors, to the
//     rest of the pool at once (pool.go: each part has one live try; a
//     late answer to an older try is ignored, so a step uses each part
//     exactly once); before that, a part that runs long is sent as well
//     to a member free for it, along a chain of nodes that avoids
//     the slow try's (its member's node, and for a relayed part those of
//     the reward evaluator and reference scorer it went through), and the
//     first answer counts (hedge.go, cluster.hedge);
//   - weights offered before any later work (one sender, so one ordered
//     stream per receiver): a WeightsOffer names a version the learner
//     node's blob server (node.BlobServer, the weight port) serves as
//     PolicyWeights chunks, encoded as fetched; the actor fetches them in
//     one stream from its sender's host, under the node's TLS, assembles
//     them as chunks sent as messages, and answers. One that cannot fetch
//     them keeps no older weights and is sent the chunks as messages
//     (publish.go, weights.go; cluster.weight_stream=false sends every
//     version so). Publication does not wait for the acknowledgements,
//     which only time it, so a frozen generator holds a part (reissued
//     when it is dropped) rather than the step;
//   - parts that wait while a role has no member, with a one-line notice
//     every 5 s; a worker heartbeats and joins again once dropped, and one
//     told to stop leaves at once (its requests end with its context; the
//     learner sends its parts in flight to the rest).
//
// A worker waits for a learner that is not there yet (its warm start) or
// any more (killed, or its run over: a missed heartbeat and a port that
// refuses connections, node.NothingListens; or five heartbeats missed),
// under TLS too; only a transport
// that can never fit ends it (node.CheckPeer, or node.ProbeSeeds at the
// membership port: ErrTLS, one line naming the certificate's fault). The learner's refusals go through
// ClusterOptions.Refused: one line a minute per peer and kind.
//
// Membership (node's own provider: the learner's membership port, under
// the cluster's TLS, polled every 500 ms) is only for finding the learner; no grains are used, so nothing can be activated twice
// (go-deps §11b). Every gRPC batch is bounded by the run's largest
// message (messageBound): gRPC drops an oversized batch silently (§11d).
// Tests that run nodes are separate OS processes (tests/cluster_test.go):
// the library races inside itself (§11e).
//
// # Synchronous and asynchronous training
//
// With train.max_staleness = 0 a batch is generated only after the
// previous step's weights reached the generators: on-policy. With
// max_staleness = s > 0 generators run ahead so that no sample is more
// than s versions old when the learner takes it (fewer batches ahead when
// train.sync_every > 1: batchesAhead); every sample carries the policy
// version that drew it, and the learner corrects stale samples with the
// truncated importance ratio on their behaviour log-probs. Either way the
// weights a batch is generated from are those after a step fixed by its
// own step number (Trainer.sourceStep), handed to the generators before
// it is produced (in synchronous mode as soon as the step before has made
// them, so that their trip to remote generators overlaps the end of that
// step: publishNext): a run is deterministic for a seed however fast its
// actors are, and a checkpoint keeps those weights (behaviour/) so a
// resume is exact. Weights go to the generators as an immutable in-memory
// snapshot inside one process, or as PolicyWeights chunks: fetched from
// the weight port by another node's actors, sent as messages to local
// ones with PipelineOptions.ChunkWeights.
//
// # Faults
//
// A checkpoint is sealed with the SHA-256 of every file (runlog.Seal) and
// verified when loaded; weights, optimiser moments and controller state
// read from disk are range-checked; an update that leaves a weight
// non-finite is rolled back by the learner and its step skipped
// (BAD_UPDATE); train.max_skipped_steps skips in a row stop the run with a
// checkpoint (ErrNoProgress), and so does an interrupt (ErrInterrupted).
// docs/RELIABILITY.md lists every fault and the test that shows it.
//
// # Warm start, then RL
//
// WarmStart trains the random policy supervised on generated correct
// solutions; Run stops it once greedy accuracy reaches 40% at two
// consecutive checks (train.warm_start_steps is the cap), saves it as the
// frozen reference and starts RL from it with a fresh optimiser at the RL
// learning rate. A model.checkpoint replaces the warm start (it is then
// both start and reference); a resumed run loads its reference and last
// complete checkpoint.
//
// # Invariants
//
//   - No stage modifies a message it received; derived data goes into a
//     new message, which may share the received one's sub-messages
//     (TestMessagesNotMutated hashes every message at send and after the
//     step).
//   - Random draws are seeded from (run seed, step, stage, index), never
//     from a stream shared by stages; a completion from (its prompt's seed,
//     its index in the group), so results do not depend on which actor
//     answered first, how the batch was split or whether a part was
//     retried.
//
// Run checks what it can before creating the run directory (a
// model.checkpoint's config.json, dataset prompts against the context,
// the memory the run needs: gpu.Config.LearnerBytes, SampleBytes and
// ScoreBytes against the memory available, refused with the
// train.micro_batch, train.prompts_per_step or
// generation.max_completion_len that would fit: memory.go), sets the Go
// memory limit from that plan unless GOMEMLIMIT is set, and removes a
// directory it created when the run ends before its first metrics line or
// checkpoint; a resumed run's directory is never removed.
//
// It imports gpu, rewards, messages, config (in the wiring only) and
// internal/tokenizer, and its own sub-packages (node, trace, meter,
// runlog, guard, evaluate); nothing below it imports actors.
//
// Example:
//
//	cfg := config.Default()
//	err := actors.Run(ctx, cfg, os.Stdout) // runs/<name>/: metrics, samples, checkpoints, report
package actors
