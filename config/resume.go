package config

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
)

// RunConfigFile is the file in a run directory that holds the run's
// effective configuration, written when the run starts (the trainer's
// runlog.ConfigFile). A resume takes it as the base layer.
const RunConfigFile = "config.yaml"

// resumeMayChange reports whether key may differ between a run's saved
// configuration and the one resuming it: how long the run goes on and how
// often it checkpoints, evaluates and logs, how the learner cuts a batch
// into passes (train.micro_batch: the same step, to float rounding),
// which checkpoints it keeps, its safety limits (skipped steps, update size), its metrics outputs
// (output.tensorboard, the metrics endpoints, metrics.top_k_kl), where it runs
// (model.device and its precision model.dtype, cluster.*) and how it is traced. model.checkpoint is the run's starting
// point, replaced on resume by its own checkpoint (Validate refuses setting
// it together with train.resume). Every other key changes what the
// checkpoint means (model, task, rewards, objective, loss, generation,
// controllers, optimiser, batch shape, seeds, output location).
func resumeMayChange(key string) bool {
	switch key {
	case "train.steps", "train.micro_batch", "train.checkpoint_every", "train.eval_every", "train.eval_prompts", "train.resume",
		"train.max_skipped_steps", "optim.max_update_ratio", "output.keep_checkpoints",
		"output.log_every", "output.sample_every", "output.sample_rows", "model.device", "model.dtype", "model.checkpoint",
		"output.tensorboard", "output.prometheus_port", "output.pprof", "output.otlp_metrics_endpoint", "output.serve", "metrics.top_k_kl":
		return true
	}
	return strings.HasPrefix(key, "cluster.") || strings.HasPrefix(key, "trace.")
}

// CheckResume compares a run's saved configuration with the effective
// configuration resuming it and returns the first key, in section order,
// whose change resume refuses, as a one-line *Error (ErrConflict) naming
// the key, its new and its saved value; nil when every difference is
// allowed. Allowed: train.steps (to extend the run; not with a cosine or
// linear optim.schedule, whose decay is laid out over train.steps),
// train.micro_batch, train.checkpoint_every, train.eval_every,
// train.eval_prompts, train.max_skipped_steps, optim.max_update_ratio, output.log_every,
// output.sample_every, output.sample_rows, output.keep_checkpoints,
// output.tensorboard, output.prometheus_port, output.pprof, output.otlp_metrics_endpoint,
// output.serve, metrics.top_k_kl, model.device, model.dtype, cluster.* and trace.* (and train.resume and
// model.checkpoint, which a resume sets itself).
func CheckResume(saved, effective *Config) error {
	t := keys()
	was, now := t.values(saved), t.values(effective)
	for _, l := range t.leaves {
		if sameValue(was[l.key], now[l.key]) {
			continue
		}
		if l.key == "train.steps" && saved.Optim.Schedule != ScheduleConstant {
			return &Error{Key: l.key, Value: formatValue(now[l.key]),
				Reason: fmt.Sprintf("cannot change on resume with optim.schedule %s: its decay spans the saved %s steps", saved.Optim.Schedule, formatValue(was[l.key])),
				Err:    ErrConflict}
		}
		if resumeMayChange(l.key) {
			continue
		}
		return &Error{Key: l.key, Value: formatValue(now[l.key]),
			Reason: fmt.Sprintf("cannot change on resume (the run was saved with %s; start a new run to change it)", formatValue(was[l.key])),
			Err:    ErrConflict}
	}
	return nil
}

// sameValue compares two values of one key; nil and empty lists are equal.
func sameValue(a, b any) bool {
	va, vb := reflect.ValueOf(a), reflect.ValueOf(b)
	if va.Kind() == reflect.Slice && vb.Kind() == reflect.Slice && va.Len() == 0 && vb.Len() == 0 {
		return true
	}
	return reflect.DeepEqual(a, b)
}

// loadResume loads the configuration that resumes run directory dir: the
// saved configuration (src.RunConfig: the newest checkpoint's; or the
// run's config.yaml) over the defaults, for keys it lacks, as the base,
// then env and flags, which may change only what CheckResume allows.
// model.checkpoint is cleared: the run continues from its own checkpoint.
// A saved configuration missing a whole section (a file cut short) is
// refused, never filled in from the defaults.
func loadResume(t *keyTable, src Sources, dir string) (*Config, error) {
	if src.File != "" {
		return nil, &Error{Key: "config", Value: fmt.Sprintf("%q", src.File),
			Reason: "cannot be combined with train.resume (a resumed run takes its configuration from its checkpoint)", Err: ErrConflict}
	}
	data, source, err := savedConfig(src, dir)
	if err != nil {
		return nil, err
	}
	flat, err := parseFile(t, parseYAML, data, strconv.Quote(strings.TrimPrefix(source, "file ")), source)
	if err != nil {
		return nil, err
	}
	if err := t.checkSections(flat, source); err != nil {
		return nil, err
	}
	k, _, err := layer(t, t.values(Default()), Sources{})
	if err != nil {
		return nil, err
	}
	if err := k.Load(mapProvider(flat), nil); err != nil {
		return nil, fmt.Errorf("config: merge: %w", err)
	}
	saved, err := decode(k)
	if err != nil {
		return nil, err
	}
	base := t.values(saved)
	base["model.checkpoint"] = ""
	if k, _, err = layer(t, base, Sources{Env: src.Env, Flags: src.Flags}); err != nil {
		return nil, err
	}
	c, err := decode(k)
	if err != nil {
		return nil, err
	}
	if err := CheckResume(saved, c); err != nil {
		return nil, err
	}
	if err := c.Validate(); err != nil {
		return nil, err
	}
	return c, nil
}

// savedConfig returns the saved configuration of the run directory dir
// and its source, as one-line errors naming train.resume.
func savedConfig(src Sources, dir string) ([]byte, string, error) {
	file := filepath.Join(dir, RunConfigFile)
	if err := checkRunDir(dir, file, src.RunConfig == nil); err != nil {
		return nil, "", err
	}
	if src.RunConfig == nil {
		data, err := os.ReadFile(file)
		if err != nil {
			return nil, "", &Error{Key: "train.resume", Value: fmt.Sprintf("%q", dir), Reason: "cannot read " + RunConfigFile + ": " + oneLine(unwrapPath(err)), Err: ErrSource}
		}
		return data, "file " + file, nil
	}
	data, source, err := src.RunConfig(dir)
	if err != nil {
		return nil, "", &Error{Key: "train.resume", Value: fmt.Sprintf("%q", dir), Reason: oneLine(err.Error()), Err: ErrSource}
	}
	return data, source, nil
}

// checkSections refuses saved values that lack a whole top-level section:
// Config.YAML writes every section, so such a file was cut short, and its
// missing keys would silently take their defaults (a truncated config.yaml
// once resumed a listwise run as GRPO at another learning rate).
func (t *keyTable) checkSections(flat map[string]any, source string) error {
	present := map[string]bool{}
	for key := range flat {
		section, _, _ := strings.Cut(key, ".")
		present[section] = true
	}
	for _, l := range t.leaves {
		section, _, _ := strings.Cut(l.key, ".")
		if !present[section] {
			return &Error{Key: section, Reason: "missing from the saved configuration (the file was cut short or damaged; nothing was resumed)", Source: source, Err: ErrSource}
		}
	}
	return nil
}

// checkRunDir refuses a resume directory that is missing or (when
// needFile) has no saved configuration, in one line.
func checkRunDir(dir, file string, needFile bool) error {
	fail := func(reason string) error {
		return &Error{Key: "train.resume", Value: fmt.Sprintf("%q", dir), Reason: reason, Err: ErrSource}
	}
	st, err := os.Stat(dir)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return fail("no such directory")
	case err != nil:
		return fail("cannot read: " + oneLine(unwrapPath(err)))
	case !st.IsDir():
		return fail("is not a directory")
	case !needFile:
		return nil
	}
	if _, err := os.Stat(file); errors.Is(err, fs.ErrNotExist) {
		return fail(fmt.Sprintf("has no %s (not a run directory)", RunConfigFile))
	} else if err != nil {
		return fail(fmt.Sprintf("cannot read %s: %s", RunConfigFile, oneLine(unwrapPath(err))))
	}
	return nil
}
