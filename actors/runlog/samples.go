package runlog

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/mgrpo/mgrpo/internal/atomicfile"
)

// StandardSampleColumns returns the columns of the original project's
// sample table (spec §3.1, "Sample table / sidecar"), followed by one
// "reward/<key>" column per reward function:
//
//	step, prompt_index, completion_index, group_size, reward_rank_desc,
//	prompt, completion, reward_total, advantage, q_mass,
//	update_weight_raw, update_mass_proxy, reward/<key>...
func StandardSampleColumns(rewardKeys []string) []string {
	cols := []string{
		"step", "prompt_index", "completion_index", "group_size", "reward_rank_desc",
		"prompt", "completion", "reward_total", "advantage", "q_mass",
		"update_weight_raw", "update_mass_proxy",
	}
	for _, k := range rewardKeys {
		cols = append(cols, "reward/"+k)
	}
	return append(cols, "generator")
}

// HighKLTable is the name, in a sample file, of the table of the step's
// metrics.top_k_kl tokens with the largest per-token KL.
const HighKLTable = "high_kl_tokens"

// HighKLColumns returns the columns of the HighKLTable: the token's
// completion (prompt_index, completion_index as in the samples), its
// position and id in the completion, its text, its K3 term e^d − d − 1 and
// ratio e^d, its old (behaviour) and new (learner) log-probs, rescaled to
// temperature 1 as the train/ keys, the completion's advantage and text.
func HighKLColumns() []string {
	return []string{"prompt_index", "completion_index", "position", "token_id", "token", "kl", "ratio",
		"logp_old", "logp_new", "advantage", "completion"}
}

// SampleTable is a table written into a sample file beside the samples,
// under Name as {"columns": [...], "data": [[...], ...]}.
type SampleTable struct {
	Name    string
	Columns []string
	Rows    [][]any
}

// SamplesFileName is the sidecar file name for step: step_NNNNNN.json
// (six digits, zero padded, as the original's "step_{step:06d}").
func SamplesFileName(step int) string {
	return fmt.Sprintf("step_%06d.json", step)
}

// WriteSamples writes the sample table of step to samples/step_NNNNNN.json,
// atomically, as {"columns": [...], "data": [[...], ...]} with one row per
// line, then each extra table under its name. Every row must have one
// value per column; values are anything encoding/json accepts, and float
// NaN/±Inf are written as null. The rows are not modified.
func (d *Dir) WriteSamples(step int, columns []string, rows [][]any, extra ...SampleTable) error {
	data, err := EncodeSamples(columns, rows, extra...)
	if err != nil {
		return fmt.Errorf("write samples step %d: %w", step, err)
	}
	path := filepath.Join(d.path, SamplesDir, SamplesFileName(step))
	if err := atomicfile.WriteBytes(path, data); err != nil {
		return fmt.Errorf("write samples step %d: %w", step, err)
	}
	return nil
}

// EncodeSamples returns the sidecar JSON of a sample table and its extra
// tables (see WriteSamples).
func EncodeSamples(columns []string, rows [][]any, extra ...SampleTable) ([]byte, error) {
	var b bytes.Buffer
	b.WriteByte('{')
	if err := encodeTable(&b, columns, rows); err != nil {
		return nil, err
	}
	for _, t := range extra {
		name, err := json.Marshal(t.Name)
		if err != nil || t.Name == "" || t.Name == "columns" || t.Name == "data" {
			return nil, fmt.Errorf("table name %q: %w", t.Name, ErrBadTable)
		}
		fmt.Fprintf(&b, ",\n%s: {", name)
		if err := encodeTable(&b, t.Columns, t.Rows); err != nil {
			return nil, fmt.Errorf("table %s: %w", t.Name, err)
		}
		b.WriteByte('}')
	}
	b.WriteString("}\n")
	return b.Bytes(), nil
}

// encodeTable writes "columns": [...], "data": [[...], ...] to b, one row
// per line.
func encodeTable(b *bytes.Buffer, columns []string, rows [][]any) error {
	cols, err := json.Marshal(columns)
	if err != nil {
		return fmt.Errorf("columns: %w", err)
	}
	if columns == nil {
		cols = []byte("[]")
	}
	b.WriteString(`"columns": `)
	b.Write(cols)
	b.WriteString(`, "data": [`)
	for i, row := range rows {
		if len(row) != len(columns) {
			return fmt.Errorf("row %d has %d values for %d columns: %w", i, len(row), len(columns), ErrBadTable)
		}
		rb, err := json.Marshal(finiteRow(row))
		if err != nil {
			return fmt.Errorf("row %d: %v: %w", i, err, ErrBadTable)
		}
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString("\n  ")
		b.Write(rb)
	}
	if len(rows) > 0 {
		b.WriteByte('\n')
	}
	b.WriteByte(']')
	return nil
}

// finiteRow returns a copy of row with non-finite floats replaced by nil.
func finiteRow(row []any) []any {
	out := make([]any, len(row))
	for i, v := range row {
		switch x := v.(type) {
		case float64:
			if math.IsNaN(x) || math.IsInf(x, 0) {
				v = nil
			}
		case float32:
			if f := float64(x); math.IsNaN(f) || math.IsInf(f, 0) {
				v = nil
			}
		}
		out[i] = v
	}
	return out
}

// removeSamplesAfter deletes samples/step_NNNNNN.json files whose step is
// larger than step.
func removeSamplesAfter(dir string, step int) error {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return fmt.Errorf("list samples: %w", err)
	}
	for _, e := range entries {
		s, ok := parseSamplesName(e.Name())
		if !ok || s <= step {
			continue
		}
		if err := os.Remove(filepath.Join(dir, e.Name())); err != nil {
			return fmt.Errorf("remove samples: %w", err)
		}
	}
	return nil
}

// parseSamplesName returns the step of a "step_NNNNNN.json" name.
func parseSamplesName(name string) (int, bool) {
	num, ok := strings.CutPrefix(name, "step_")
	if !ok {
		return 0, false
	}
	num, ok = strings.CutSuffix(num, ".json")
	if !ok {
		return 0, false
	}
	s, err := strconv.Atoi(num)
	return s, err == nil && s >= 0
}
