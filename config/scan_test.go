package config

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// manyKeys writes n lines, each made by line(i), after head.
func manyKeys(head string, n int, line func(i int) string) []byte {
	var b strings.Builder
	b.WriteString(head)
	for i := range n {
		b.WriteString(line(i))
	}
	return []byte(b.String())
}

// TestHugeFilesStopAtFirstProblem gives the file parsers files of 200,000
// keys: the YAML and TOML decoders compare each key of a mapping with
// every other (two million keys took hours), so the scan before them must
// refuse the first bad key, in file order, without decoding.
func TestHugeFilesStopAtFirstProblem(t *testing.T) {
	const n = 200_000
	cases := []struct {
		name     string
		parse    parseFunc
		data     []byte
		want     error
		wantLine string
	}{
		{"yaml unknown keys", parseYAML, manyKeys("train:\n  zz_first: 1\n", n, func(i int) string { return fmt.Sprintf("  k%d: 1\n", i) }),
			ErrUnknownKey, "config: train.zz_first: unknown key (file big.yaml)"},
		{"yaml unknown sections", parseYAML, manyKeys("zz_first: 1\n", n, func(i int) string { return fmt.Sprintf("s%d: 1\n", i) }),
			ErrUnknownKey, "config: zz_first: unknown key (file big.yaml)"},
		{"yaml one key given again and again", parseYAML, manyKeys("train:\n", n, func(int) string { return "  steps: 1\n" }),
			ErrSource, "config: train.steps: is given twice (lines 2 and 3) (file big.yaml)"},
		{"yaml mapping under a key", parseYAML, manyKeys("train:\n  steps:\n", n, func(i int) string { return fmt.Sprintf("    k%d: 1\n", i) }),
			ErrType, "config: train.steps = {...}: must be an integer (file big.yaml)"},
		{"yaml mapping in a list", parseYAML, manyKeys("cluster:\n  seeds:\n  -\n", n, func(i int) string { return fmt.Sprintf("    k%d: 1\n", i) }),
			ErrType, "config: cluster.seeds = {...}: must be a list of values, not of mappings (file big.yaml)"},
		{"toml unknown keys", parseTOML, manyKeys("[train]\nzz_first = 1\n", n, func(i int) string { return fmt.Sprintf("k%d = 1\n", i) }),
			ErrUnknownKey, "config: train.zz_first: unknown key (file big.yaml)"},
		{"toml unknown dotted keys", parseTOML, manyKeys("", n, func(i int) string { return fmt.Sprintf("train.k%d = 1\n", i) }),
			ErrUnknownKey, "config: train.k0: unknown key (file big.yaml)"},
		{"toml unknown tables", parseTOML, manyKeys("", n, func(i int) string { return fmt.Sprintf("[t%d]\n", i) }),
			ErrUnknownKey, "config: t0: unknown key (file big.yaml)"},
		{"toml inline table under a key", parseTOML, append(manyKeys("[train]\nsteps = {", n, func(i int) string { return fmt.Sprintf("k%d = 1, ", i) }), "z = 1}\n"...),
			ErrType, "config: train.steps = {...}: must be an integer (file big.yaml)"},
		{"toml unknown key in an inline table", parseTOML, append(manyKeys("train = {steps = 1, ", n, func(i int) string { return fmt.Sprintf("k%d = 1, ", i) }), "z = 1}\n"...),
			ErrUnknownKey, "config: train.k0: unknown key (file big.yaml)"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := parseFile(keys(), tc.parse, tc.data, `"big.yaml"`, "file big.yaml")
			if !errors.Is(err, tc.want) || err.Error() != tc.wantLine {
				t.Errorf("parse = %v, want %q (%v)", err, tc.wantLine, tc.want)
			}
		})
	}
}

// TestScanKeepsWhatDecodes: aliases, merge keys and known keys in every
// form still load after the scan.
func TestScanKeepsWhatDecodes(t *testing.T) {
	cases := []struct {
		name  string
		parse parseFunc
		text  string
		key   string
		want  any
	}{
		{"yaml merge", parseYAML, "controller:\n  tau: &h {horizon: 5}\n  beta:\n    <<: *h\n", "controller.beta.horizon", 5},
		{"yaml merge of a list", parseYAML, "controller:\n  tau: &h {horizon: 5}\n  beta:\n    <<: [*h]\n    horizon: 6\n", "controller.beta.horizon", 6},
		{"yaml alias value", parseYAML, "cluster: {name: &n abc}\ntrace: {service_name: *n}\n", "trace.service_name", "abc"},
		{"yaml merge of a mapping", parseYAML, "controller:\n  beta:\n    <<: {horizon: 7}\n", "controller.beta.horizon", 7},
		{"yaml merge of unknown keys", parseYAML, "generation: &g {num_generations: 6}\ntrain: {<<: *g}\n", "", nil},
		{"toml dotted keys", parseTOML, "train.steps = 4\n[controller.tau]\nlr = 0.2\n", "train.steps", 4},
		{"toml inline table", parseTOML, "train = {steps = 5}\n", "train.steps", 5},
		{"retired key", parseYAML, "cluster: {provider: local}\ntrain: {steps: 2}\n", "train.steps", 2},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			flat, err := parseFile(keys(), tc.parse, []byte(tc.text), `"f"`, "file f")
			if tc.key == "" {
				if err == nil {
					t.Fatal("an unknown key behind an alias passed")
				}
				return
			}
			if err != nil {
				t.Fatalf("parse: %v", err)
			}
			if flat[tc.key] != tc.want {
				t.Errorf("%s = %v, want %v", tc.key, flat[tc.key], tc.want)
			}
		})
	}
}

// TestFileTooLarge: a --config file past MaxFileBytes, or a device that
// never ends, is refused before it is read whole.
func TestFileTooLarge(t *testing.T) {
	big := filepath.Join(t.TempDir(), "big.yaml")
	if err := os.WriteFile(big, make([]byte, MaxFileBytes+1), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{big, "/dev/zero"} {
		_, err := loadArgs([]string{"--config", name}, nil)
		if !errors.Is(err, ErrSource) || !strings.Contains(err.Error(), "larger than 1048576 bytes") {
			t.Errorf("--config %s: %v, want ErrSource: larger than 1048576 bytes", name, err)
		}
	}
}
