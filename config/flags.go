package config

import (
	"errors"
	"fmt"
	"io"
	"reflect"
	"strings"
	"time"

	"github.com/knadh/koanf/providers/posflag"
	"github.com/knadh/koanf/v2"
	"github.com/spf13/pflag"
)

// flagAlias is a short flag that sets a key.
type flagAlias struct{ name, key string }

// flagAliases lists the aliases in --help order.
func flagAliases() []flagAlias {
	return []flagAlias{{"role", "cluster.role"}, {"resume", "train.resume"}}
}

// aliasTarget returns the key an alias sets.
func aliasTarget(name string) (string, bool) {
	for _, a := range flagAliases() {
		if a.name == name {
			return a.key, true
		}
	}
	return "", false
}

// AddFlags registers on fs: --config FILE|recipe:NAME, one
// --section.key flag per configuration key (default shown in --help),
// and the aliases --role (cluster.role) and --resume (train.resume).
// Values are kept as text and typed by Load, so a bad value is reported
// like any other layer's.
func AddFlags(fs *pflag.FlagSet) {
	fs.String("config", "", "config file (.yaml, .yml, .toml) or recipe:NAME")
	def := keys()
	for _, a := range flagAliases() {
		l, _ := def.lookup(a.key)
		addText(fs, a.name, l.typ, "", "same as --"+a.key)
	}
	values := def.values(Default())
	for _, l := range def.leaves {
		addText(fs, l.key, l.typ, defaultText(values[l.key]), l.help)
	}
}

func addText(fs *pflag.FlagSet, name string, typ reflect.Type, def, help string) {
	v := &textValue{text: def, typ: typeName(typ)}
	f := fs.VarPF(v, name, "", help)
	if v.typ == "bool" {
		f.NoOptDefVal = "true"
	}
}

// ParseFlags parses args into fs and turns pflag's errors about unknown
// or incomplete flags into one-line *Errors naming the flag.
func ParseFlags(fs *pflag.FlagSet, args []string) error {
	fs.SetOutput(io.Discard)
	fs.Usage = func() {}
	err := fs.Parse(args)
	if err == nil || errors.Is(err, pflag.ErrHelp) {
		return err
	}
	var notExist *pflag.NotExistError
	if errors.As(err, &notExist) {
		name := notExist.GetSpecifiedName()
		e := keys().unknown(name, "flag --"+name)
		return e
	}
	var needs *pflag.ValueRequiredError
	if errors.As(err, &needs) {
		name := needs.GetSpecifiedName()
		return &Error{Key: name, Reason: "needs a value", Source: "flag --" + name, Err: ErrType}
	}
	return &Error{Key: "flags", Reason: oneLine(err.Error()), Err: ErrUnknownKey}
}

// loadFlags merges the flags the user set, typed, through koanf's posflag
// provider (which skips unset flags whose key already exists).
func loadFlags(t *keyTable, k *koanf.Koanf, fs *pflag.FlagSet) error {
	if err := aliasConflicts(fs); err != nil {
		return err
	}
	var firstErr error
	p := posflag.ProviderWithFlag(fs, ".", k, func(f *pflag.Flag) (string, any) {
		if f.Name == "config" || firstErr != nil {
			return "", nil
		}
		key := f.Name
		if target, ok := aliasTarget(key); ok {
			if !f.Changed {
				return "", nil
			}
			key = target
		}
		l, ok := t.lookup(key)
		if !ok {
			return "", nil // a flag of the caller's own, not a key
		}
		if !f.Changed {
			return key, nil // posflag keeps the lower layers' value
		}
		v, err := l.coerce(f.Value.String(), "flag --"+f.Name)
		if err != nil {
			firstErr = err
			return "", nil
		}
		return key, v
	})
	if err := k.Load(p, nil); err != nil {
		return fmt.Errorf("config: merge flags: %w", err)
	}
	return firstErr
}

// aliasConflicts refuses --role x --cluster.role y with x != y.
func aliasConflicts(fs *pflag.FlagSet) error {
	for _, al := range flagAliases() {
		alias, key := al.name, al.key
		a, b := fs.Lookup(alias), fs.Lookup(key)
		if a == nil || b == nil || !a.Changed || !b.Changed {
			continue
		}
		if a.Value.String() != b.Value.String() {
			return &Error{Key: key, Value: fmt.Sprintf("%q", b.Value.String()), Reason: fmt.Sprintf("conflicts with --%s %q", alias, a.Value.String()), Source: "flag --" + key, Err: ErrConflict}
		}
	}
	return nil
}

// textValue is a pflag.Value that keeps the text as given; Type names the
// key's type for --help.
type textValue struct {
	text string
	typ  string
}

func (v *textValue) String() string     { return v.text }
func (v *textValue) Set(s string) error { v.text = s; return nil }
func (v *textValue) Type() string       { return v.typ }

func typeName(t reflect.Type) string {
	if t == reflect.TypeOf(time.Duration(0)) {
		return "duration"
	}
	switch t.Kind() {
	case reflect.Int, reflect.Int64:
		return "int"
	case reflect.Float64:
		return "float"
	case reflect.Bool:
		return "bool"
	case reflect.Slice:
		return "list"
	}
	return "string"
}

func defaultText(v any) string {
	switch x := v.(type) {
	case []string:
		return strings.Join(x, ",")
	case []float64:
		parts := make([]string, len(x))
		for i, f := range x {
			parts[i] = formatValue(f)
		}
		return strings.Join(parts, ",")
	case float64:
		return formatValue(x)
	case time.Duration:
		return x.String()
	}
	return fmt.Sprint(v)
}
