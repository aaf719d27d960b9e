#!/usr/bin/env bash
# Reproduces docs/RESULTS.md §5–§7: why the original's listwise preset
# collapses, the maxent_listwise recipes against grpo, and what harder task
# settings need.
#
#   docs/maxent.sh                      # make build, then every stage into /tmp/mgrpo-maxent
#   OUT=dir BIN=path PAR=2 docs/maxent.sh   # another directory, a built binary, 2 runs at a time
#   docs/maxent.sh countdown summary    # only some stages (later stages reuse earlier outputs)
#
# Stages, in order: trace weak addition countdown variants harder plots summary.
# About 40 minutes of CPU in all. Needs bash, and Debian's python3 with
# python3-numpy and python3-matplotlib for trace, plots and summary. Runs
# are deterministic for their seeds, so PAR changes only the wall time.
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
OUT=${OUT:-/tmp/mgrpo-maxent}
PAR=${PAR:-1}
PY=${PY:-/usr/bin/python3}
if [[ -z ${BIN:-} ]]; then
	make -C "$ROOT" build
	BIN=$ROOT/bin/mgrpo-node
fi
RUNS=$OUT/runs
EVALS=$OUT/evals
mkdir -p "$RUNS" "$EVALS"
export BIN RUNS EVALS OUT

# The original's listwise preset (spec §4.2) on top of a maxent_listwise
# recipe: tau 0.5, beta 0, no tau controller (q temperature 2, skipping,
# clip term and length normalisation are the same in both).
PRESET="--maxent.tau=0.5 --maxent.beta=0 --controller.tau.enabled=false"

# train NAME ARGS...: one mgrpo-node --role all run into $RUNS/NAME, log in $OUT/NAME.log.
train() {
	local name=$1
	shift
	echo "== $name: mgrpo-node --role all $* --output.dir=$RUNS --output.name=$name"
	rm -rf "${RUNS:?}/$name"
	/usr/bin/time -f "wall %e s" nice -n 15 "$BIN" --role all "$@" --output.dir="$RUNS" --output.name="$name" >"$OUT/$name.log" 2>&1
	tail -n 2 "$OUT/$name.log"
}

# evaluate RUN N: pass@8, coverage, mean@8, greedy, entropy of a run's last checkpoint as JSON.
evaluate() {
	nice -n 15 "$BIN" eval --checkpoint "$RUNS/$1" --n "$2" --k 8 >"$EVALS/$1.json"
}
export -f train evaluate

# parallel: run each line of stdin (a train/evaluate call) with up to $PAR at a time.
parallel() {
	xargs -d '\n' -P "$PAR" -I{} bash -c '{}'
}

# 5. One collapsing run traced step by step (addition from a weak 200-step
# warm start, where the preset collapsed in 3 seeds of 3), and the recipe
# from the same start; every step's completions and policy are kept.
trace() {
	train add-warm200 --config recipe:addition-grpo --train.steps=0 --train.warm_start_steps=200
	local keep="--train.steps=200 --train.seed=1 --output.sample_every=1 --output.sample_rows=128 --train.checkpoint_every=1"
	parallel <<-EOF
		train trace-add-preset-s1 --config recipe:addition-maxent_listwise $PRESET --model.checkpoint=$RUNS/add-warm200/reference $keep
		train trace-add-recipe-s1 --config recipe:addition-maxent_listwise --model.checkpoint=$RUNS/add-warm200/reference $keep
	EOF
	for r in preset recipe; do
		nice -n 15 "$PY" "$ROOT/docs/analysis/trace_listwise.py" "$BIN" "$RUNS/trace-add-$r-s1" "$OUT/trace-add-$r-s1.json"
	done
}

# 6a. The weak start for 600 steps, 3 seeds: the preset against the recipe.
weak() {
	[[ -d $RUNS/add-warm200 ]] || train add-warm200 --config recipe:addition-grpo --train.steps=0 --train.warm_start_steps=200
	for s in 1 2 3; do
		echo "train add-weak-preset-s$s --config recipe:addition-maxent_listwise $PRESET --model.checkpoint=$RUNS/add-warm200/reference --train.steps=600 --train.seed=$s"
		echo "train add-weak-recipe-s$s --config recipe:addition-maxent_listwise --model.checkpoint=$RUNS/add-warm200/reference --train.steps=600 --train.seed=$s"
	done | parallel
}

# 6b. Addition from the default warm start (it stops once greedy accuracy holds 40%): grpo against the recipe.
addition() {
	train add-warm --config recipe:addition-grpo --train.steps=0
	evaluate add-warm 2000
	for s in 1 2 3; do
		for obj in grpo maxent_listwise; do
			echo "train add-$obj-s$s --config recipe:addition-$obj --model.checkpoint=$RUNS/add-warm/reference --train.steps=600 --train.seed=$s && evaluate add-$obj-s$s 2000"
		done
	done | parallel
}

# 6c. Countdown (3 numbers in 1-20, small preset): one warm start per seed, shared by
# grpo, the new maxent_listwise recipe and the original's preset.
countdown() {
	for s in 1 2 3; do
		echo "train cd-warm-s$s --config recipe:countdown-grpo --model.preset=small --train.steps=0 --model.seed=$s --train.seed=$s && evaluate cd-warm-s$s 2000"
	done | parallel
	for s in 1 2 3; do
		local from="--model.preset=small --model.checkpoint=$RUNS/cd-warm-s$s/reference --train.steps=600 --train.seed=$s"
		echo "train cd-grpo-s$s --config recipe:countdown-grpo $from && evaluate cd-grpo-s$s 2000"
		echo "train cd-maxent_listwise-s$s --config recipe:countdown-maxent_listwise $from && evaluate cd-maxent_listwise-s$s 2000"
		echo "train cd-preset-s$s --config recipe:countdown-maxent_listwise $PRESET $from && evaluate cd-preset-s$s 2000"
	done | parallel
}

# 6d. What each part of the recipe does, seed 1: lower tau targets, no reference
# tilt, and the meta-controller on the policy entropy.
variants() {
	local cd="--config recipe:countdown-maxent_listwise --model.preset=small --model.checkpoint=$RUNS/cd-warm-s1/reference --train.steps=600 --train.seed=1"
	local weak="--config recipe:addition-maxent_listwise --model.checkpoint=$RUNS/add-warm200/reference --train.steps=600 --train.seed=1"
	local meta="--controller.tau.enabled=false --controller.meta.enabled=true --controller.meta.lr=0.05 --controller.tau.target_entropy=0.35 --controller.beta.kl_target=0.1"
	parallel <<-EOF
		train cd-target14-s1 $cd --controller.tau.target_entropy=1.4 && evaluate cd-target14-s1 2000
		train cd-target10-s1 $cd --controller.tau.target_entropy=1.0 && evaluate cd-target10-s1 2000
		train cd-nobeta-s1 $cd --maxent.beta=0 && evaluate cd-nobeta-s1 2000
		train cd-meta-s1 $cd $meta && evaluate cd-meta-s1 2000
		train add-weak-nobeta-s1 $weak --maxent.beta=0 --maxent.tau=0.5
		train add-weak-beta05-s1 $weak $PRESET --maxent.beta=0.5
	EOF
}

# 7. Harder settings: how long a warm start each needs on small (the warm start
# stops once greedy accuracy holds 40%, so a large cap costs nothing), then RL.
harder() {
	parallel <<-EOF
		train warm-add3 --task.digits=3 --train.steps=0 --train.warm_start_steps=4500
		train warm-cd4 --config recipe:countdown-grpo --model.preset=small --task.numbers=4 --generation.max_completion_len=17 --train.steps=0 --train.warm_start_steps=3000
	EOF
	parallel <<-EOF
		evaluate warm-add3 2000
		evaluate warm-cd4 2000
		train add3-grpo --task.digits=3 --model.checkpoint=$RUNS/warm-add3/reference --train.steps=200 && evaluate add3-grpo 2000
		train add3-maxent_listwise --config recipe:addition-maxent_listwise --task.digits=3 --model.checkpoint=$RUNS/warm-add3/reference --train.steps=200 && evaluate add3-maxent_listwise 2000
		train cd4-grpo --config recipe:countdown-grpo --model.preset=small --task.numbers=4 --generation.max_completion_len=17 --model.checkpoint=$RUNS/warm-cd4/reference --train.steps=600 && evaluate cd4-grpo 2000
		train cd4-maxent_listwise --config recipe:countdown-maxent_listwise --model.preset=small --task.numbers=4 --generation.max_completion_len=17 --model.checkpoint=$RUNS/warm-cd4/reference --train.steps=600 && evaluate cd4-maxent_listwise 2000
	EOF
}

plots() {
	"$PY" "$ROOT/docs/analysis/plots.py" "$OUT" "$RUNS" "$ROOT/docs/img"
}

summary() {
	"$PY" "$ROOT/docs/analysis/summary.py" "$OUT"
	echo
	"$PY" "$ROOT/docs/analysis/guards.py" "$OUT" # §8
}

stages=("$@")
[[ ${#stages[@]} -gt 0 ]] || stages=(trace weak addition countdown variants harder plots summary)
for stage in "${stages[@]}"; do
	case $stage in
	trace | weak | addition | countdown | variants | harder | plots | summary) "$stage" ;;
	*) echo "unknown stage $stage (trace weak addition countdown variants harder plots summary)" >&2; exit 2 ;;
	esac
done
