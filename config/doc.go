// Package config loads, layers and validates the trainer configuration.
//
// A Config has one section per concern (model, task, generation, rewards,
// maxent, controller, loss, optim, train, cluster, trace, output). Keys
// are snake_case and spelled the same in every layer:
//
//	file   train: {max_staleness: 2}
//	env    MGRPO_TRAIN__MAX_STALENESS=2
//	flag   --train.max_staleness=2
//
// Layers, lowest first: Default() < --config FILE (.yaml, .yml, .toml) or
// --config recipe:NAME (the embedded recipes/*.yaml) < MGRPO_ env < flags
// the user set. Lists are YAML/TOML lists or comma-separated text in env
// and flags; durations are Go durations ("10s").
//
// A resume (train.resume set by env or flags) replaces the first two
// layers with the run's own config.yaml (RunConfigFile) and refuses
// --config; env and flags may then change only what CheckResume allows
// (train.steps, checkpoint/eval/log cadence, model.device, cluster.*,
// trace.*), so a checkpoint keeps its meaning.
//
// # Errors
//
// Load refuses unknown keys in every layer, values of the wrong type,
// out-of-range values and impossible combinations with an *Error whose
// message is one line naming the key:
//
//	config: train.max_staleness = -1: must be 0 or more
//
// Environment variables are read only if they start with MGRPO_; a
// variable containing "__" must name a key, one without is refused only
// when it looks like a mistyped key (MGRPO_TRAIN_STEPS).
//
// # Example
//
//	cfg, err := config.Load(config.Sources{File: "recipe:addition-grpo", Env: os.Environ()})
//	if err != nil { fmt.Fprintln(os.Stderr, err); os.Exit(2) }
//
// Package config imports no other mgrpo package: it knows no preset table
// or tokenizer, so model.preset's name, the dimensions it resolves to and
// a completion that must fit the model's context are checked where the
// configuration is resolved (the wiring in actors), with the same *Error.
package config
