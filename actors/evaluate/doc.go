// Package evaluate measures a policy on a task: greedy accuracy, and from k
// samples per prompt pass@k, mean@k, coverage (distinct correct answers per
// prompt) and policy entropy per token, the quantities MaxEnt-GRPO is meant
// to move (DESIGN §4, §5; spec §3.2 "Eval").
//
// These are plain functions, no actors. What evaluation needs from a model
// is the one-method Sampler interface, so tests use a fake sampler whose
// answers they control; ModelSampler adapts the gpu package's model.
//
// # Determinism and seeds
//
// For a seed S, the N evaluation problems are drawn from
// rand.New(rand.NewPCG(S+EvalSeedOffset, EvalStream)), a stream separate
// from the training prompts (which use S itself), so evaluation problems
// are not the training batches replayed; in small problem spaces (2-digit
// addition has 10^4 problems) individual problems can still coincide by
// chance. A data set (a Finite task: its held-out rows) gives N distinct
// rows, or every row when it has fewer than N, never one row twice: the
// N of a Result counts distinct problems. The samplers get seeds derived from S and the prompt chunk, so
// Run is deterministic for a given seed, Options and sampler.
//
// # Metrics
//
// With c_i correct answers among the k samples of prompt i:
//
//	greedy_accuracy = mean_i [greedy completion of i is Correct]
//	pass_at_k       = mean_i PassAtK(k, c_i, k) = mean_i [c_i > 0]
//	mean_at_k       = mean_i c_i / k
//	coverage        = mean_i |{Canonical(y) : y correct sample of i}|
//	entropy_per_token = Σ entropy over sampled tokens / Σ sampled tokens
//
// pass@k uses the unbiased estimator of Chen et al. (2021),
// 1 − C(n−c, k)/C(n, k), which for n = k samples is exactly "any of the k
// is correct"; PassAtK gives the general form for n > k.
//
// It imports rewards/tasks and gpu (for ModelSampler); it never imports
// actors, messages or config.
//
// Example:
//
//	task, _ := tasks.New("countdown", tasks.Options{})
//	res, err := evaluate.Run(ctx, sampler, task, evaluate.Options{N: 200, K: 8, Temperature: 1, Seed: 1})
//	fmt.Println(res.PassAtK, res.Coverage)
package evaluate
