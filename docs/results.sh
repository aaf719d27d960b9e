#!/usr/bin/env bash
# Reproduces every number in docs/RESULTS.md.
#
#   docs/results.sh                 # make build, then all runs into /tmp/mgrpo-results
#   OUT=dir BIN=path docs/results.sh  # another output directory / an already built binary
#   docs/results.sh countdown600 summary   # only some stages (they reuse earlier outputs in OUT)
#
# Stages, in order: addition ablation countdown countdown600 countdown_base summary.
# About 18 minutes on 2 cores for all of them, one job at a time. Needs bash and
# python3 (python3 only for the summary tables at the end). Every run uses
# fixed seeds; on the machine of RESULTS.md rerunning gave the same numbers.
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
OUT=${OUT:-/tmp/mgrpo-results}
if [[ -z ${BIN:-} ]]; then
	make -C "$ROOT" build
	BIN=$ROOT/bin/mgrpo-node
fi
RUNS=$OUT/runs
# These runs measured the original's listwise preset, which the maxent_listwise
# recipes held until issue 14 (docs/RESULTS.md §6 has the recipes that replaced
# it): listwise runs get it back with these flags.
PRESET="--maxent.tau=0.5 --maxent.beta=0 --controller.tau.enabled=false"
# preset OBJ: the flags that make a maxent_listwise recipe the original's preset.
preset() {
	[[ $1 == maxent_listwise ]] && echo "$PRESET" || true
}
EVALS=$OUT/evals
mkdir -p "$RUNS" "$EVALS/ckpt"

# train NAME ARGS...: one mgrpo-node --role all run into $RUNS/NAME, log in $OUT/NAME.log.
train() {
	local name=$1
	shift
	echo "== $name: mgrpo-node --role all $* --output.dir=$RUNS --output.name=$name"
	/usr/bin/time -f "wall %e s" "$BIN" --role all "$@" --output.dir="$RUNS" --output.name="$name" >"$OUT/$name.log" 2>&1
	tail -n 3 "$OUT/$name.log"
}

# evaluate CHECKPOINT TASK N FILE: pass@8, coverage, mean@8, greedy, entropy as JSON.
evaluate() {
	"$BIN" eval --checkpoint "$1" --task "$2" --n "$3" --k 8 >"$4"
}

# 1. Addition, 2 digits, small preset.
addition() {
	# Two warm starts: the default (200 steps) and a 1000-step cap, which the
	# trainer stops early once greedy accuracy is >= 40% at two consecutive checks.
	train add-warm200 --config recipe:addition-grpo --train.steps=0 --train.warm_start_steps=200
	train add-warm1000 --config recipe:addition-grpo --train.steps=0 --train.warm_start_steps=1000
	for start in warm200 warm1000; do
		evaluate "$RUNS/add-$start/reference" addition 200 "$EVALS/add-$start-n200.json"
		for seed in 1 2 3; do
			for obj in grpo maxent_listwise; do
				name=add-$start-$obj-s$seed
				train "$name" --config "recipe:addition-$obj" $(preset "$obj") --model.checkpoint="$RUNS/add-$start/reference" \
					--train.steps=200 --train.seed="$seed"
				evaluate "$RUNS/$name" addition 200 "$EVALS/$name-n200.json"
			done
		done
	done
}

# 1b. Two single-seed variants of listwise from the weak warm start (sharper weights; reference tilt).
ablation() {
	for v in "tau01 --maxent.tau=0.1" "beta01 --maxent.beta=0.1"; do
		set -- $v
		train "add-warm200-maxent_listwise-$1-s1" --config recipe:addition-maxent_listwise $PRESET \
			--model.checkpoint="$RUNS/add-warm200/reference" --train.steps=200 --train.seed=1 "$2"
	done
}

# 2. Countdown (3 numbers in 1-20), small preset (the recipes say base).
countdown() {
	# One warm start per seed (600 steps, the recipe's value), shared by both objectives of that seed.
	for seed in 1 2 3; do
		train "cd-warm-s$seed" --config recipe:countdown-grpo --model.preset=small --train.steps=0 \
			--model.seed="$seed" --train.seed="$seed"
		for n in 200 1000; do
			evaluate "$RUNS/cd-warm-s$seed/reference" countdown "$n" "$EVALS/cd-warm-s$seed-n$n.json"
		done
		for obj in grpo maxent_listwise; do
			name=cd-$obj-s$seed
			train "$name" --config "recipe:countdown-$obj" $(preset "$obj") --model.preset=small \
				--model.checkpoint="$RUNS/cd-warm-s$seed/reference" --train.steps=300 --train.seed="$seed"
			for n in 200 1000; do
				evaluate "$RUNS/$name" countdown "$n" "$EVALS/$name-n$n.json"
			done
			for step in 50 100 150 200 250 300; do
				evaluate "$RUNS/$name/checkpoints/step-$step" countdown 200 "$EVALS/ckpt/$name-$step.json"
			done
		done
	done
}

# 2b. The same countdown comparison run for 600 RL steps (from the same warm starts).
countdown600() {
	for seed in 1 2 3; do
		for obj in grpo maxent_listwise; do
			name=cd600-$obj-s$seed
			train "$name" --config "recipe:countdown-$obj" $(preset "$obj") --model.preset=small \
				--model.checkpoint="$RUNS/cd-warm-s$seed/reference" --train.steps=600 --train.seed="$seed"
			for n in 200 1000; do
				evaluate "$RUNS/$name" countdown "$n" "$EVALS/$name-n$n.json"
			done
		done
	done
}

# 2c. The countdown recipes as written (base preset), seed 1 only.
countdown_base() {
	train cd-base-warm-s1 --config recipe:countdown-grpo --train.steps=0
	evaluate "$RUNS/cd-base-warm-s1/reference" countdown 200 "$EVALS/cd-base-warm-s1-n200.json"
	for obj in grpo maxent_listwise; do
		train "cd-base-$obj-s1" --config "recipe:countdown-$obj" $(preset "$obj") --model.checkpoint="$RUNS/cd-base-warm-s1/reference" --train.seed=1
		evaluate "$RUNS/cd-base-$obj-s1" countdown 200 "$EVALS/cd-base-$obj-s1-n200.json"
	done
}

# 3. Summary tables (markdown) on stdout.
summary() {
command -v python3 >/dev/null || { echo "python3 not found: summary skipped; results in $OUT"; return 0; }
OUT=$OUT python3 - <<'EOF'
import json, os, statistics as st
out = os.environ["OUT"]
def load(path):
    return json.load(open(os.path.join(out, path)))
def curve(run):
    rows = [json.loads(l) for l in open(os.path.join(out, "runs", run, "metrics.jsonl"))]
    return {r["step"]: r["eval/greedy_accuracy"] for r in rows if "eval/greedy_accuracy" in r}

for start in ("warm200", "warm1000"):
    runs = ["add-%s-%s-s%d" % (start, obj, s) for obj in ("grpo", "maxent_listwise") for s in (1, 2, 3)]
    cs = {r: curve(r) for r in runs}
    print("\nAddition from add-%s: greedy accuracy (256 prompts) by RL step\n" % start)
    print("| step | " + " | ".join(runs) + " |")
    print("|" + "---|" * (len(runs) + 1))
    for step in sorted(cs[runs[0]]):
        print("| %d | " % step + " | ".join("%.1f%%" % (100 * cs[r][step]) for r in runs) + " |")
    print("\nAddition from add-%s: eval --n 200 --k 8 of the final checkpoints\n" % start)
    print("| run | greedy | pass@8 | mean@8 | entropy/token |\n|---|---|---|---|---|")
    for r in ["add-%s" % start] + runs:
        d = load("evals/%s-n200.json" % r)
        print("| %s | %.3f | %.3f | %.3f | %.3f |" % (r, d["greedy_accuracy"], d["pass_at_k"], d["mean_at_k"], d["entropy_per_token"]))

runs = ["add-warm200-maxent_listwise-s1", "add-warm200-maxent_listwise-tau01-s1", "add-warm200-maxent_listwise-beta01-s1"]
cs = {r: curve(r) for r in runs}
print("\nListwise variants from add-warm200, seed 1: greedy accuracy (256 prompts) by RL step\n")
print("| step | " + " | ".join(runs) + " |\n|" + "---|" * (len(runs) + 1))
for step in sorted(cs[runs[0]]):
    print("| %d | " % step + " | ".join("%.1f%%" % (100 * cs[r][step]) for r in runs) + " |")

keys = [("pass_at_k", "pass@8"), ("coverage", "coverage"), ("mean_at_k", "mean@8"),
        ("greedy_accuracy", "greedy"), ("entropy_per_token", "entropy/token")]
for prefix, steps, n in (("cd", 300, 200), ("cd", 300, 1000), ("cd600", 600, 200), ("cd600", 600, 1000)):
    print("\nCountdown, eval --n %d --k 8, final checkpoints (step %d)\n" % (n, steps))
    print("| seed | policy | " + " | ".join(h for _, h in keys) + " |\n|" + "---|" * (len(keys) + 2))
    agg = {}
    for s in (1, 2, 3):
        for obj in ("warm", "grpo", "maxent_listwise"):
            d = load("evals/%s-%s-s%d-n%d.json" % ("cd" if obj == "warm" else prefix, obj, s, n))
            agg.setdefault(obj, []).append(d)
            print("| %d | %s | " % (s, obj) + " | ".join("%.3f" % d[k] for k, _ in keys) + " |")
    for obj, ds in agg.items():
        print("| mean ± sd | %s | " % obj + " | ".join("%.3f ± %.3f" % (st.mean(d[k] for d in ds), st.stdev([d[k] for d in ds])) for k, _ in keys) + " |")
    diffs = {k: [a[k] - b[k] for a, b in zip(agg["maxent_listwise"], agg["grpo"])] for k, _ in keys}
    print("| Δ listwise − grpo (per seed) | | " + " | ".join(", ".join("%+.3f" % x for x in diffs[k]) for k, _ in keys) + " |")

print("\nCountdown, base preset (recipes as written), seed 1, eval --n 200 --k 8\n")
print("| policy | " + " | ".join(h for _, h in keys) + " |\n|" + "---|" * (len(keys) + 1))
for obj in ("warm", "grpo", "maxent_listwise"):
    d = load("evals/cd-base-%s-s1-n200.json" % obj)
    print("| %s | " % obj + " | ".join("%.3f" % d[k] for k, _ in keys) + " |")

print("\nCountdown, eval --n 200 --k 8 of the checkpoints, mean over seeds 1-3 (step 0 = warm start)\n")
print("| step | " + " | ".join("%s grpo | %s listwise" % (h, h) for _, h in keys if h != "greedy") + " |")
print("|" + "---|" * 9)
for step in (0, 50, 100, 150, 200, 250, 300):
    cells = []
    for k, h in keys:
        if h == "greedy":
            continue
        for obj in ("grpo", "maxent_listwise"):
            f = "evals/cd-warm-s%d-n200.json" if step == 0 else "evals/ckpt/cd-%s-s%%d-%d.json" % (obj, step)
            cells.append("%.3f" % st.mean(load(f % s)[k] for s in (1, 2, 3)))
    print("| %d | " % step + " | ".join(cells) + " |")
EOF
}

stages=("$@")
[[ ${#stages[@]} -gt 0 ]] || stages=(addition ablation countdown countdown600 countdown_base summary)
for stage in "${stages[@]}"; do
	case $stage in
	addition | ablation | countdown | countdown600 | countdown_base | summary) "$stage" ;;
	*) echo "unknown stage $stage (addition ablation countdown countdown600 countdown_base summary)" >&2; exit 2 ;;
	esac
done
