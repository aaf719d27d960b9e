// Package tasks provides the verifiable-reward tasks mgrpo trains on:
// seeded problem generators, exact verifiers, a data set loader (JSONL
// and Parquet), and the reward functions (accuracy, correct, format,
// length) that score completions with a task's verifier. It imports the
// standard library and parquet-go: nothing of actors, gpu or messages.
//
// # Text formats
//
// The policy reads characters (one token each, plus BOS and EOS) in a
// 64-token context, so prompts and completions are short: every built-in
// task with default Options fits a prompt and its Solution in MaxChars (62)
// characters. A completion is the text the model wrote before EOS.
//
//	task          prompt                                 completion              Problem.Answer
//	addition      37+45=                                 82                      82
//	countdown     3,7,9>30:                              7*3+9                   3,7,9>30
//	wordproblems  ann has 3 pens, gets 5, loses 2:       3+5=8 8-2=6 #### 6      6
//
// Addition (names "addition", "add"): two operands uniform in
// [0, 10^Digits) (Digits 2 by default); the completion must equal the sum
// exactly, no spaces. With Reverse the sum is written least-significant
// digit first. Any other optionally signed digit string is well formed.
//
// Countdown (names "countdown", "countdown-lite", "countdown_lite"): the
// prompt lists Numbers numbers (3 by default) in [1, MaxNumber] (20), then
// '>' and the target, then ':'. The answer is the prompt without ':', so a
// JSONL countdown dataset stores {"prompt": "3,7,9>30:", "answer":
// "3,7,9>30"}. The completion is an expression over + - * / and
// parentheses, spaces allowed, no unary minus, no leading zeros. It is
// correct if it uses each listed number AT MOST once (the rule;
// TinyZero demands exactly once; a number listed twice may be used twice),
// reaches the target, and every intermediate result is an exact integer:
// a division by zero or with a remainder, or an int64 overflow, makes the
// expression wrong (no fractions, no rational arithmetic). An expression
// that parses is well formed; longer than MaxExprLen bytes or nested
// deeper than MaxExprDepth is malformed. Targets are built from a random
// expression over all the numbers with operators from Ops, lie in
// [1, MaxTarget] and are not one of the numbers (unless 1000 random
// expressions all miss, when the sum of the first two numbers is used), so
// every generated problem is solvable; many have several solutions, which is what MaxEnt
// weighting is meant to keep.
//
// Word problems (names "wordproblems", "word_problems", "word-problems",
// "words"): six two-step templates (gets/loses/finds/sells, bags of) with
// numbers in [1, MaxNumber] and bag sizes in [2, 9]; no step goes below
// zero. The completion ends with "#### n" (GSM8K's final-answer marker,
// spaces after "####" and trailing spaces allowed); anything before the
// last "####" is a free scratchpad. It is correct if n equals the answer
// (leading zeros ignored, commas read as thousands separators), well
// formed if it has that ending. A gold answer may be GSM8K's worked
// solution ("... #### 72"): its final integer is the answer and the
// solution itself is what Solution returns. Solution
// writes the scratchpad "3+5=8 8-2=6 #### 6", or just "#### 6" with
// BareAnswers or for a prompt no template matches.
//
// # Datasets
//
// LoadRows reads a data file by its extension: JSONL (.jsonl, .ndjson,
// .json; one object per line, blank lines skipped) or Parquet (.parquet,
// the Hugging Face hub's format; top-level columns). Fields names the
// prompt and answer columns; left empty, the first present of prompt,
// question, problem and of answer, solution is taken (TRL's
// prompt/solution, GSM8K's question/answer). The prompt is a string, the
// answer a string or a number (kept as its text). A missing column names
// itself and lists the columns there are; a bad line or row fails with its
// number, e.g. `dataset data.jsonl: line 7: missing "answer"` or `dataset
// d.parquet: row 12: "answer" is null`. NewDataset and OpenDatasets serve
// loaded problems as a Task judged by a built-in verifier, checking every
// answer's format up front; OpenDatasets also holds rows out for
// evaluation (a separate file, or a seeded share of the rows).
//
// # Reward functions
//
// Reward and Rewards build RewardFuncs by name; names are matched without
// case, and unknown names are an error listing the known ones. Each
// verifier call runs under a timeout (DefaultTimeout, 1 s, as the
// original's grader); a verifier that overruns gives the verdict TimedOut,
// which every reward function scores 0.
//
//	name      aliases                                       value per completion
//	accuracy  accuracy_reward, pure_accuracy,               1 correct, 0.1 well formed but wrong,
//	          pure_accuracy_math                            0 malformed or timed out
//	correct   binary, binary_accuracy                       1 correct, else 0 (pass@k, eval)
//	format    format_reward                                 1 well formed, else 0
//	length    len, len_reward, length_penalty               Kimi k1.5 penalty over the call:
//	                                                        λ = 0.5 − (L − Lmin)/(Lmax − Lmin),
//	                                                        L in characters; λ if correct,
//	                                                        min(0, λ) otherwise; 0 if all equal
//
// The aliases name the original's registry entries that play the same
// role here; their values are this package's (the original's
// pure_accuracy_math pays 0.05 for a formatted wrong answer, here 0.1 as
// the issue asks).
//
// # Invariants
//
//   - Verifiers never panic and stay fast on any input: their work is
//     linear in the input's length, the countdown parser refuses more than
//     MaxExprLen bytes, and the countdown solver has a fixed search budget.
//   - The same rng state gives the same problems and solutions
//     (math/rand/v2, e.g. rand.New(rand.NewPCG(seed, seq))).
//   - Tasks are immutable after New and safe for concurrent use.
//   - Reward functions never modify their inputs and return one value per
//     completion.
//
// Example:
//
//	task, _ := tasks.New("countdown", tasks.Options{})
//	p := task.Generate(rand.New(rand.NewPCG(1, 1)))
//	acc, _ := tasks.Reward("accuracy", task, 0)
//	scores := acc([]string{"7*3+9"}, []string{p.Answer})
package tasks
