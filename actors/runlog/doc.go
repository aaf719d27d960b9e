// Package runlog writes the outputs of one training run and reads them back.
//
// A run lives in one directory, runs/<name>/ (DESIGN §5):
//
//	config.yaml                     the configuration the run started with
//	metrics.jsonl                   one JSON object per step: {"step": N, "train/...": v, ...}
//	metrics.jsonl.unreadable        lines a resume could not read, kept aside
//	warm_start.jsonl                the warm start's steps, in the metrics.jsonl format
//	samples/step_NNNNNN.json        sample tables {"columns": [...], "data": [[...], ...]}
//	checkpoints/step-N/             model, optimiser, controller_state.json,
//	                                config.yaml (the configuration it was trained
//	                                with), trainer_state.json, MANIFEST.sha256 and
//	                                a COMPLETE marker
//	reference/                      the frozen reference model, sealed likewise
//	final_eval.json                 the final evaluation of the last step, written
//	                                once it has ended: the run is done
//	report.html                     the run's page: one self-contained file (inline
//	                                data, script and style) with the headline, curves,
//	                                stage times, samples and every metric
//	tensorboard/events.out.tfevents.*
//	                                the metrics as TensorBoard events (output.tensorboard),
//	                                one file per process that wrote the run
//
// It provides Dir (Create, Open, Resume, WriteConfig, WriteMetrics,
// WriteWarmStart, WriteTensorBoard, WriteSamples, SaveCheckpoint,
// LatestCheckpoint, WriteReport, WriteFinalEval), ReadFinalEval, the
// checkpoint helpers SaveCheckpoint, Seal, Verify, LatestComplete,
// Resolve, Prune, LoadTrainerState and SavedConfig, ReadMetrics, Progress,
// the terminal progress line, WritePage (the page of several runs
// overlaid) and Serve (the live page). A Dir
// renders report.html from the logs it keeps in columns as it writes them,
// thinned to a bounded size; it reads no log again.
//
// Resuming a run:
//
//	d, err := runlog.Open("runs/addition-small")
//	ck, st, err := d.LatestCheckpoint() // newest step-N with COMPLETE, verified
//	aside, err := d.Resume(st.Step)     // drop metrics and samples after it
//
// # Invariants
//
//   - metrics.jsonl holds at most one line per step, in increasing step
//     order; keys inside a line are sorted; NaN and ±Inf are written as null,
//     so every line is valid JSON. Dir.Resume drops lines after the
//     resumed step and moves a line it cannot read to
//     metrics.jsonl.unreadable, keeping every other line, and cuts
//     TensorBoard events after the resumed step; metrics.jsonl is
//     fsynced before each checkpoint that covers it.
//   - TensorBoard event files are appended to, like metrics.jsonl, and
//     hold the steps and values of its lines.
//   - Every other file is written atomically (temporary file, fsync, rename,
//     fsync of the directory): a reader sees the old file or the new one.
//   - A checkpoint directory checkpoints/step-N exists only once complete:
//     it is assembled in checkpoints/.tmp-step-N, its COMPLETE marker is
//     written last, and it is renamed into place. LatestComplete ignores
//     anything without the marker.
//   - Every file of a checkpoint is listed with its SHA-256 in
//     MANIFEST.sha256 (sha256sum's format), whose own SHA-256 is in
//     COMPLETE; LatestCheckpoint, Resolve and SavedConfig verify them and
//     name a file that does not match (ErrDamaged).
//
// Besides the standard library it imports only internal/atomicfile, its
// sub-package tensorboard (the event file format, written with protowire)
// and go.yaml.in/yaml/v3 (config.yaml for the page's headline):
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
