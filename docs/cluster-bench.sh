#!/usr/bin/env bash
# Cluster benchmarks (docs/BENCHMARKS.md, "Across processes"): steps/s of the default recipe
# with --role all against the same run as 3 processes over loopback (learner; generator;
# reward+reference), and the weight-sync time and bytes of each preset. Both runs start from
# one warm start (model.checkpoint), so only RL steps are timed.
# Usage: docs/cluster-bench.sh [STEPS]   (from the repository root; needs make build)
# PRESETS="tiny base" limits the presets, PRESET_STEPS (40) sets their steps; RECIPE=0 leaves
# out the default recipe's runs.
set -euo pipefail
steps=${1:-200}
presets=${PRESETS:-tiny small base}
preset_steps=${PRESET_STEPS:-40}
bin=$PWD/bin/mgrpo-node
work=$(mktemp -d)
trap 'pkill -P $$ 2>/dev/null || true; rm -rf "$work"' EXIT
port=$((20000 + RANDOM % 20000))
seed=127.0.0.1:$port

# stats RUN: RL steps/s from metrics.jsonl (wall time between the first and last step's ends,
# so the first step's start-up is left out), and medians of the weight-sync keys.
stats() {
  python3 - "$1" <<'PY'
import json, statistics, sys
recs = [json.loads(l) for l in open(sys.argv[1] + "/metrics.jsonl")]
recs = [r for r in recs if r["step"] > 0]
t = [r["time/step_s"] for r in recs[1:]]
sync = [r["time/weight_sync_s"] for r in recs if "perf/weight_sync_bytes" in r]
b = [r["perf/weight_sync_bytes"] for r in recs if "perf/weight_sync_bytes" in r]
out = {"steps_per_s": len(t) / sum(t), "step_ms_median": 1e3 * statistics.median(t)}
if sync:
    out |= {"weight_sync_ms_median": 1e3 * statistics.median(sync), "weight_sync_ms_p90": 1e3 * sorted(sync)[int(0.9 * len(sync))],
            "weight_sync_bytes": int(statistics.median(b))}
print(json.dumps(out))
PY
}

cluster() { # NAME FLAGS...: learner, a generator node and a reward+reference node
  local name=$1; shift
  "$bin" --role generator --cluster.seeds "$seed" >"$work/$name-gen.log" 2>&1 &
  local g=$!
  "$bin" --role reward,reference --cluster.seeds "$seed" >"$work/$name-rr.log" 2>&1 &
  local r=$!
  "$bin" --role learner --cluster.port "$port" --output.dir "$work" --output.name "$name" "$@" >"$work/$name.log" 2>&1
  kill $g $r; wait $g $r 2>/dev/null || true
}

echo "# $(lscpu | sed -n 's/^Model name: *//p'), $(nproc) cores, load $(cut -d' ' -f1-3 /proc/loadavg)"
if [[ ${RECIPE:-1} != 0 ]]; then
  "$bin" --output.dir "$work" --output.name warm --train.steps 1 >/dev/null
  common=(--model.checkpoint "$work/warm/reference" --train.steps "$steps" --train.eval_every 0 --train.checkpoint_every 0 --output.sample_every 0)
  "$bin" --role all --output.dir "$work" --output.name all "${common[@]}" >/dev/null
  echo "default recipe, --role all:       $(stats "$work/all")"
  cluster three "${common[@]}"
  echo "default recipe, 3 processes:      $(stats "$work/three")"
fi
for preset in $presets; do
  each=(--model.preset "$preset" --train.warm_start_steps 0 --train.steps "$preset_steps" --train.eval_every 0
    --train.checkpoint_every 0 --output.sample_every 0 --train.guard warn)
  "$bin" --role all --output.dir "$work" --output.name "all-$preset" "${each[@]}" >/dev/null
  echo "$preset preset, --role all:          $(stats "$work/all-$preset")"
  cluster "sync-$preset" "${each[@]}"
  echo "$preset preset, 3 processes:         $(stats "$work/sync-$preset")"
done
