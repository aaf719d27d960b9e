package config

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/knadh/koanf/maps"
	"github.com/knadh/koanf/v2"
	"github.com/spf13/pflag"
)

// EnvPrefix starts every environment variable that sets a key:
// MGRPO_SECTION__KEY, with "__" between nesting levels
// (MGRPO_CONTROLLER__TAU__LR sets controller.tau.lr).
const EnvPrefix = "MGRPO_"

// RecipePrefix marks a --config value that names a built-in recipe
// (recipe:addition-grpo) rather than a file.
const RecipePrefix = "recipe:"

// Sources are the layers Load puts over the defaults, lowest first.
type Sources struct {
	// File is a YAML (.yaml, .yml) or TOML (.toml) file, or
	// "recipe:NAME"; "" for none.
	File string
	// Env is the environment as KEY=VALUE strings (os.Environ() in the
	// binary, a literal slice in tests). Variables starting with MGRPO_
	// are read.
	Env []string
	// Flags is a flag set prepared by AddFlags and already parsed; only
	// flags the user set override. nil for none.
	Flags *pflag.FlagSet
	// RunConfig returns the saved configuration (YAML, as Config.YAML
	// writes it) that a resume of the run directory dir continues with,
	// and where it came from ("file PATH"); the trainer reads it from the
	// run's newest verified checkpoint (runlog.SavedConfig). nil reads
	// dir/config.yaml.
	RunConfig func(dir string) (data []byte, source string, err error)
}

// Load layers defaults < file < env < flags, then validates. Every error
// is an *Error whose message is one line naming the key.
//
// When the layers set train.resume, the run directory's config.yaml
// (RunConfigFile) takes the place of the defaults and the file: env and
// flags go over it and may change only what CheckResume allows, and a
// File is refused.
func Load(src Sources) (*Config, error) {
	t := keys()
	k, set, err := layer(t, t.values(Default()), src)
	if err != nil {
		return nil, err
	}
	if resume := k.String("train.resume"); resume != "" {
		return loadResume(t, src, resume)
	}
	c, err := decode(k)
	if err != nil {
		return nil, err
	}
	taskDefaults(c, func(key string) bool { return set[key] })
	if err := c.Validate(); err != nil {
		return nil, err
	}
	return c, nil
}

// layer puts src's file, env and flags, in that order, over base (flat
// dotted keys), and reports the keys those layers set.
func layer(t *keyTable, base map[string]any, src Sources) (*koanf.Koanf, map[string]bool, error) {
	k := koanf.New(".")
	if err := k.Load(mapProvider(base), nil); err != nil {
		return nil, nil, fmt.Errorf("config: load defaults: %w", err)
	}
	set := map[string]bool{}
	layers := []func(*keyTable) (map[string]any, error){
		func(t *keyTable) (map[string]any, error) { return readFile(t, src.File) },
		func(t *keyTable) (map[string]any, error) { return readEnv(t, src.Env) },
	}
	for _, read := range layers {
		flat, err := read(t)
		if err != nil {
			return nil, nil, err
		}
		if err := k.Load(mapProvider(flat), nil); err != nil {
			return nil, nil, fmt.Errorf("config: merge: %w", err)
		}
		for key := range flat {
			set[key] = true
		}
	}
	if src.Flags != nil {
		if err := loadFlags(t, k, src.Flags); err != nil {
			return nil, nil, err
		}
		src.Flags.Visit(func(f *pflag.Flag) {
			key := f.Name
			if target, ok := aliasTarget(key); ok {
				key = target
			}
			set[key] = true
		})
	}
	return k, set, nil
}

// decode turns layered values into a Config (not yet validated).
func decode(k *koanf.Koanf) (*Config, error) {
	c := &Config{}
	if err := k.UnmarshalWithConf("", c, koanf.UnmarshalConf{Tag: "koanf"}); err != nil {
		return nil, fmt.Errorf("config: decode: %w", err)
	}
	return c, nil
}

// mapProvider is a koanf.Provider over a flat dotted map.
type mapProvider map[string]any

func (m mapProvider) Read() (map[string]any, error) {
	return maps.Unflatten(map[string]any(m), "."), nil
}

func (m mapProvider) ReadBytes() ([]byte, error) {
	return nil, errors.New("config: mapProvider has no bytes")
}

// readFile reads a config file or recipe into flat, typed values.
func readFile(t *keyTable, name string) (map[string]any, error) {
	out := map[string]any{}
	if name == "" {
		return out, nil
	}
	data, ext, source, err := fileBytes(name)
	if err != nil {
		return nil, err
	}
	parse := parseYAML
	switch ext {
	case ".yaml", ".yml":
	case ".toml":
		parse = parseTOML
	default:
		return nil, &Error{Key: "config", Value: fmt.Sprintf("%q", name), Reason: "unsupported file type (want .yaml, .yml or .toml)", Err: ErrSource}
	}
	return parseFile(t, parse, data, fmt.Sprintf("%q", name), source)
}

// parseFunc decodes a file's text into nested maps, refusing the first
// unknown key; value names the file in errors and source is where keys
// come from.
type parseFunc func(t *keyTable, data []byte, value, source string) (map[string]any, error)

// parseFile decodes a file's data with parse into flat, typed keys;
// value names the file in errors and source is where keys come from.
func parseFile(t *keyTable, parse parseFunc, data []byte, value, source string) (map[string]any, error) {
	m, err := parse(t, data, value, source)
	if err != nil {
		return nil, err
	}
	raw := map[string]any{}
	if err := t.flatten(m, "", source, raw); err != nil {
		return nil, err
	}
	out := map[string]any{}
	for key, v := range raw {
		l, _ := t.lookup(key)
		if out[key], err = l.coerce(v, source); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// Parse reads a configuration from YAML text over the defaults and
// validates it: a run's config.yaml as the learner sends it to a worker
// node. source names the text in errors.
func Parse(data []byte, source string) (*Config, error) {
	t := keys()
	flat, err := parseFile(t, parseYAML, data, source, source)
	if err != nil {
		return nil, err
	}
	k := koanf.New(".")
	for _, layer := range []map[string]any{t.values(Default()), flat} {
		if err := k.Load(mapProvider(layer), nil); err != nil {
			return nil, fmt.Errorf("config: merge: %w", err)
		}
	}
	c, err := decode(k)
	if err != nil {
		return nil, err
	}
	if err := c.Validate(); err != nil {
		return nil, err
	}
	return c, nil
}

func fileBytes(name string) (data []byte, ext, source string, err error) {
	if recipe, ok := strings.CutPrefix(name, RecipePrefix); ok {
		data, err := Recipe(recipe)
		if err != nil {
			return nil, "", "", &Error{Key: "config", Value: fmt.Sprintf("%q", name), Reason: fmt.Sprintf("unknown recipe (known: %s)", strings.Join(Recipes(), ", ")), Err: ErrSource}
		}
		return data, ".yaml", "recipe " + recipe, nil
	}
	data, err = readLimited(name, MaxFileBytes)
	if err != nil {
		return nil, "", "", &Error{Key: "config", Value: fmt.Sprintf("%q", name), Reason: oneLine(err.Error()), Err: ErrSource}
	}
	return data, strings.ToLower(filepath.Ext(name)), "file " + name, nil
}

// MaxFileBytes is the largest --config file Load reads: every key of the
// configuration, commented, is a few kilobytes, and a larger file is
// refused before it is parsed (a parsed YAML file takes some hundred
// times its size in memory).
const MaxFileBytes = 1 << 20

// readLimited reads the file name, refusing one of more than limit bytes
// (a file, a pipe or a device alike) and a directory.
func readLimited(name string, limit int64) ([]byte, error) {
	f, err := os.Open(name)
	if err != nil {
		return nil, fmt.Errorf("cannot read: %s", unwrapPath(err))
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, limit+1))
	if err != nil {
		return nil, fmt.Errorf("cannot read: %s", unwrapPath(err))
	}
	if int64(len(data)) > limit {
		return nil, fmt.Errorf("larger than %d bytes: no configuration is this long", limit)
	}
	return data, nil
}

func unwrapPath(err error) string {
	var pe *os.PathError
	if errors.As(err, &pe) {
		return pe.Err.Error()
	}
	return err.Error()
}

func oneLine(s string) string {
	return strings.Join(strings.Fields(s), " ")
}

// readEnv maps MGRPO_SECTION__KEY variables to typed values. A variable
// with "__" must name a key; one without is an error only when it looks
// like a mistyped key (MGRPO_TRAIN or MGRPO_TRAIN_STEPS), so variables of
// tools (MGRPO_JAEGER_BIN, say) pass untouched.
func readEnv(t *keyTable, env []string) (map[string]any, error) {
	out := map[string]any{}
	sorted := append([]string(nil), env...)
	sort.Strings(sorted)
	for _, kv := range sorted {
		name, val, ok := strings.Cut(kv, "=")
		rest, isOurs := strings.CutPrefix(name, EnvPrefix)
		if !ok || !isOurs {
			continue
		}
		source := "env " + name
		if rest == "" {
			return nil, &Error{Key: name, Reason: "unknown key (write " + EnvPrefix + "SECTION__KEY)", Source: source, Err: ErrUnknownKey}
		}
		key := strings.ToLower(strings.ReplaceAll(rest, "__", "."))
		if !strings.Contains(rest, "__") {
			if section := envSection(t, key); section != "" {
				return nil, &Error{Key: key, Reason: fmt.Sprintf("unknown key (write %s%s__KEY, with two underscores)", EnvPrefix, strings.ToUpper(section)), Source: source, Err: ErrUnknownKey}
			}
			continue
		}
		l, known := t.lookup(key)
		if !known {
			if t.sections[key] {
				return nil, &Error{Key: key, Reason: "is a section, not a key", Source: source, Err: ErrUnknownKey}
			}
			return nil, t.unknown(key, source)
		}
		v, err := l.coerce(val, source)
		if err != nil {
			return nil, err
		}
		out[key] = v
	}
	return out, nil
}

// envSection returns the top-level section that a single-underscore env
// name starts with, or "".
func envSection(t *keyTable, name string) string {
	for s := range t.sections {
		if !strings.Contains(s, ".") && (name == s || strings.HasPrefix(name, s+"_")) {
			return s
		}
	}
	return ""
}
