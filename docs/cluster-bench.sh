#!/usr/bin/env bash
# Cluster benchmarks (docs/BENCHMARKS.md, "Across processes"): steps/s of the default recipe
# with --role all against the same run as 3 processes over loopback (learner; generator;
# reward+reference), and the weight-sync time and bytes of each preset. Both runs start from
# one warm start (model.checkpoint), so only RL steps are timed.
# Usage: docs/cluster-bench.sh [STEPS]   (from the repository root; needs make build, or BIN=the
# mgrpo-node to run)
# PRESETS="tiny base" limits the presets, PRESET_STEPS (40) sets their steps; RECIPE=0 leaves
# out the default recipe's runs. ROUNDS=N repeats every pair of runs N times and ends with the
# medians of each preset's rounds and of their ratios (3 processes / --role all).
# CORES_PER_NODE=K gives each process K cores of its own, as separate machines would:
# --role all and the learner on cores 0..K-1, the generator node on K..2K-1, the
# reward+reference node on 2K..3K-1 (taskset, GOMAXPROCS=K); it needs 3K cores.
# TRACE=1 ends with one traced pair of each preset (every step sampled) and the medians of when
# each milestone of a step came, each way (docs/analysis/critical-path.py). EXTRA="FLAGS" adds
# flags to every preset run (EXTRA="--train.prompts_per_part 4": smaller parts).
set -euo pipefail
steps=${1:-200}
presets=${PRESETS:-tiny small base}
preset_steps=${PRESET_STEPS:-40}
rounds=${ROUNDS:-1}
k=${CORES_PER_NODE:-0}
if [[ $k != 0 ]] && (( 3 * k > $(nproc) )); then
  echo "cluster-bench: CORES_PER_NODE=$k needs $((3 * k)) cores; this machine has $(nproc)" >&2
  exit 2
fi
# node0, node1, node2: what runs a process on its node's cores (0: --role all and the learner,
# 1: the generator node, 2: the reward+reference node); env alone while they share the machine.
# Each execs the next, so $! is the node's own process.
node0=(env) node1=(env) node2=(env)
if [[ $k != 0 ]]; then
  node0=(env GOMAXPROCS="$k" taskset -c "0-$((k - 1))")
  node1=(env GOMAXPROCS="$k" taskset -c "$k-$((2 * k - 1))")
  node2=(env GOMAXPROCS="$k" taskset -c "$((2 * k))-$((3 * k - 1))")
fi
bin=${BIN:-$PWD/bin/mgrpo-node}
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
  "${node1[@]}" "$bin" --role generator --cluster.seeds "$seed" >"$work/$name-gen.log" 2>&1 &
  local g=$!
  "${node2[@]}" "$bin" --role reward,reference --cluster.seeds "$seed" >"$work/$name-rr.log" 2>&1 &
  local r=$!
  "${node0[@]}" "$bin" --role learner --cluster.port "$port" --output.dir "$work" --output.name "$name" "$@" >"$work/$name.log" 2>&1
  kill $g $r; wait $g $r 2>/dev/null || true
}

# pair LABEL NAME FLAGS...: --role all, then the same run as 3 processes; prints both and
# appends "LABEL all three" steps/s to $work/rounds.
pair() {
  local label=$1 name=$2; shift 2
  rm -rf "$work/all-$name" "$work/three-$name"
  "${node0[@]}" "$bin" --role all --output.dir "$work" --output.name "all-$name" "$@" >/dev/null
  local a t
  a=$(stats "$work/all-$name"); t=$(cluster "three-$name" "$@"; stats "$work/three-$name")
  printf '%-30s %s\n' "$label, --role all:" "$a" "$label, 3 processes:" "$t"
  echo "$label $(sps "$a") $(sps "$t")" >>"$work/rounds"
}
sps() { python3 -c 'import json,sys; print(json.loads(sys.argv[1])["steps_per_s"])' "$1"; }

# preset_flags PRESET: the flags of a preset's runs, from its initialisation, and EXTRA's.
preset_flags() {
  echo --model.preset "$1" --train.warm_start_steps 0 --train.steps "$preset_steps" --train.eval_every 0 \
    --train.checkpoint_every 0 --output.sample_every 0 --train.guard warn ${EXTRA:-}
}

echo "# $(lscpu | sed -n 's/^Model name: *//p'), $(nproc) cores, load $(cut -d' ' -f1-3 /proc/loadavg), cores per node: ${k/#0/shared}"
if [[ ${RECIPE:-1} != 0 ]]; then
  "${node0[@]}" "$bin" --output.dir "$work" --output.name warm --train.steps 1 >/dev/null
fi
for round in $(seq "$rounds"); do
  (( rounds > 1 )) && echo "# round $round, load $(cut -d' ' -f1 /proc/loadavg)"
  if [[ ${RECIPE:-1} != 0 ]]; then
    pair "default recipe" recipe --model.checkpoint "$work/warm/reference" --train.steps "$steps" --train.eval_every 0 \
      --train.checkpoint_every 0 --output.sample_every 0
  fi
  for preset in $presets; do
    pair "$preset preset" "$preset" $(preset_flags "$preset")
  done
done
if (( rounds > 1 )); then # medians over the rounds: --role all, 3 processes, and of the rounds' ratios
  python3 - "$work/rounds" <<'PY'
import collections, statistics, sys
by = collections.defaultdict(list)
for line in open(sys.argv[1]):
    *label, a, t = line.split()
    by[" ".join(label)].append((float(a), float(t)))
for label, r in by.items():
    print(f"{label}: {len(r)} rounds, median steps/s --role all {statistics.median(a for a, _ in r):.1f}, "
          f"3 processes {statistics.median(t for _, t in r):.1f}, median ratio {statistics.median(t / a for a, t in r):.2f}")
PY
fi
if [[ ${TRACE:-0} != 0 ]]; then # one traced pair of each preset: when each milestone of a step came
  for preset in $presets; do
    trace=(--trace.sample_ratio 1 --trace.file)
    "${node0[@]}" "$bin" --role all --output.dir "$work" --output.name "trace-all-$preset" $(preset_flags "$preset") \
      "${trace[@]}" "$work/trace-all-$preset.jsonl" >/dev/null
    cluster "trace-three-$preset" $(preset_flags "$preset") "${trace[@]}" "$work/trace-three-$preset.jsonl" # the workers' spans too
    echo "# $preset preset, one traced run each way ($preset_steps steps)"
    python3 "$(dirname "${BASH_SOURCE[0]}")/analysis/critical-path.py" "--role all=$work/trace-all-$preset.jsonl" \
      "3 processes=$work/trace-three-$preset.jsonl"
  done
fi
