package tasks

import (
	"fmt"
	"slices"
	"strings"
)

// Fields names the columns of a data set that hold the prompt and the
// answer; "" picks the first present of the defaults (DefaultPromptFields,
// DefaultAnswerFields), which cover TRL's prompt/solution and GSM8K's
// question/answer.
type Fields struct {
	Prompt string
	Answer string
}

// Column names tried, in order, when Fields leaves a name empty.
var (
	DefaultPromptFields = []string{"prompt", "question", "problem"}
	DefaultAnswerFields = []string{"answer", "solution"}
)

// resolve picks the prompt and answer columns among the data set's
// columns; a missing one is an error naming it and listing what there is.
func (f Fields) resolve(columns []string) (prompt, answer string, err error) {
	pick := func(kind, key, given string, defaults []string) (string, error) {
		if given != "" {
			if !slices.Contains(columns, given) {
				return "", fmt.Errorf("missing %s column %q (set by %s; columns: %s)", kind, given, key, listColumns(columns))
			}
			return given, nil
		}
		for _, d := range defaults {
			if slices.Contains(columns, d) {
				return d, nil
			}
		}
		return "", fmt.Errorf("no %s column: none of %s (set %s; columns: %s)", kind, strings.Join(defaults, ", "), key, listColumns(columns))
	}
	if prompt, err = pick("prompt", "task.prompt_field", f.Prompt, DefaultPromptFields); err != nil {
		return "", "", err
	}
	if answer, err = pick("answer", "task.answer_field", f.Answer, DefaultAnswerFields); err != nil {
		return "", "", err
	}
	return prompt, answer, nil
}

func listColumns(cols []string) string {
	if len(cols) == 0 {
		return "none"
	}
	return strings.Join(cols, ", ")
}
