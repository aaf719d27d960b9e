// Package runlog writes the outputs of one training run and reads them back.
//
// A run lives in one directory, runs/<name>/ (DESIGN §5):
//
//	config.yaml                     the effective configuration, as given
//	metrics.jsonl                   one JSON object per step: {"step": N, "train/...": v, ...}
//	samples/step_NNNNNN.json        sample tables {"columns": [...], "data": [[...], ...]}
//	checkpoints/step-N/             model, optimiser, controller_state.json,
//	                                trainer_state.json and a COMPLETE marker
//	report.html                     self-contained curves of the metrics
//	tensorboard/events.out.tfevents.*
//	                                the metrics as TensorBoard events (output.tensorboard),
//	                                one file per process that wrote the run
//
// It provides Dir (Create, Open, Resume, WriteConfig, WriteMetrics,
// WriteTensorBoard, WriteSamples, SaveCheckpoint, LatestCheckpoint,
// WriteReport), the checkpoint helpers SaveCheckpoint, LatestComplete, Resolve, Prune and
// LoadTrainerState, ReadMetrics, RenderReport, and Progress, the terminal
// progress line.
//
// Resuming a run:
//
//	d, err := runlog.Open("runs/addition-small")
//	ck, st, err := d.LatestCheckpoint() // newest step-N with COMPLETE
//	err = d.Resume(st.Step)             // drop metrics and samples after it
//
// # Invariants
//
//   - metrics.jsonl holds at most one line per step, in increasing step
//     order; keys inside a line are sorted; NaN and ±Inf are written as null,
//     so every line is valid JSON. Dir.Resume truncates lines after the
//     resumed step, and TensorBoard events after it.
//   - TensorBoard event files are appended to, like metrics.jsonl, and
//     hold the steps and values of its lines.
//   - Every other file is written atomically (temporary file, fsync, rename,
//     fsync of the directory): a reader sees the old file or the new one.
//   - A checkpoint directory checkpoints/step-N exists only once complete:
//     it is assembled in checkpoints/.tmp-step-N, its COMPLETE marker is
//     written last, and it is renamed into place. LatestComplete ignores
//     anything without the marker.
//
// Besides the standard library it imports only internal/atomicfile and its
// sub-package tensorboard (the event file format, written with protowire):
// model and optimiser files are written by callbacks (Part) that the
// caller supplies, so runlog never imports gpu, rewards, actors or
// messages.
//
// Example:
//
//	d, err := runlog.Create("runs", "addition-small")
//	err = d.WriteMetrics(1, map[string]float64{"train/reward": 0.41})
//	_, err = d.SaveCheckpoint(runlog.TrainerState{Step: 1}, 3, modelPart, ctrlPart)
package runlog
