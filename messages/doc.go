// Package messages holds the protobuf messages the actors exchange
// (step.proto, generated into step.pb.go by `make proto`), helpers that
// build them from Go values and read them back, weight-snapshot chunking,
// and the hash used to prove a message was not modified.
//
// One training step flows as PromptBatch → Rollouts → Scored → RefScored →
// PreparedBatch → StepReport, with PolicyWeights, StepStats →
// ControllerUpdate (the whole ControllerState), CheckpointRequest →
// CheckpointDone and SkipNotice beside it (DESIGN §2). Each message begins with
// a StepMeta header: run id, step, batch id, policy version, and a W3C
// trace-context map (propagation.MapCarrier(meta.Trace) is a carrier).
// Later messages embed the earlier ones (Scored holds its Rollouts), so
// each is self-contained when it crosses a network.
//
// # Invariants
//
//   - A message is immutable once sent. No actor modifies a message it
//     received, including its header and trace map; derived data goes into
//     a new message (DeriveMeta copies a header). Tests check this with
//     messagestest.Freeze, which compares Hash before and after.
//   - Per-completion fields are indexed by rollout i = p·K + k (prompt p,
//     completion k, K = num_generations); per-token fields have one entry
//     per completion token. CheckRollouts, CheckScored and CheckRefScored
//     verify the lengths; a mismatch is ErrShape and the stage skips the
//     batch with SkipReason SHAPE_MISMATCH.
//   - Helpers copy the slices they are given and never modify their inputs.
//     Join and Split helpers copy prompts and completions whole
//     (proto.Clone) and renumber them, so every field survives every hop
//     (TestJoinKeepsEveryField fills every field by reflection).
//   - Assembler treats every PolicyWeights chunk as untrusted: a chunk
//     whose header, shapes, total_bytes (must be 4·numel), byte ranges
//     (in bounds, never overlapping) or size (Assembler.MaxBytes per
//     version, DefaultMaxBytes = 16 GiB) do not fit is an ErrChunk and
//     leaves the Assembler unchanged; buffers are allocated only after a
//     chunk has been checked, and Done means every tensor is complete.
//
// # Example
//
//	meta := messages.NewMeta("run-1", 3, "b-3-0", 2)
//	scored, err := messages.NewScored(messages.DeriveMeta(meta), rollouts,
//		[]string{"accuracy"}, []float64{1}, raw)
//	parts, err := messages.SplitScored(scored, 8) // parts of 8 prompt groups
//	joined, err := messages.JoinScored(meta, parts, nil)
//
// Package messages imports no other mgrpo package.
package messages
