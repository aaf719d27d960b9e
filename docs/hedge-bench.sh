#!/usr/bin/env bash
# Hedging benchmark (docs/BENCHMARKS.md, "A frozen node, hedged"): a learner, two generator
# nodes and a reward+reference node train `tiny` for STEPS steps over loopback; once the run
# has written 5 steps, one generator node is frozen (SIGSTOP) for FREEZE seconds, or until the
# run ends. With FROZEN=reward the cluster is a learner, one generator node of GENERATORS
# generators (1, the default) and two reward+reference nodes, and one reward+reference node is
# frozen instead. Each round
# runs with cluster.hedge on, then off, and prints how long the learner took from the freeze
# to its end, the whole run's time and the hedged parts it counted.
# Usage: docs/hedge-bench.sh   (from the repository root; needs make build, or BIN=the
# mgrpo-node to run)   FREEZE (5), STEPS (150), ROUNDS (3), FROZEN (generator or reward),
# GENERATORS (1; FROZEN=reward only).
set -euo pipefail
bin=${BIN:-bin/mgrpo-node}
freeze=${FREEZE:-5}
steps=${STEPS:-150}
rounds=${ROUNDS:-3}
frozen_role=${FROZEN:-generator}
gens=${GENERATORS:-1} min_gens=2
[[ $frozen_role == reward ]] && min_gens=$gens
[[ $frozen_role == generator || $frozen_role == reward ]] || { echo "hedge-bench: FROZEN=$frozen_role: want generator or reward" >&2; exit 2; }
[[ -x $bin ]] || { echo "hedge-bench: no $bin: run make build, or set BIN" >&2; exit 2; }

# round HEDGE: one run with cluster.hedge=HEDGE; prints its line.
round() {
  local hedge=$1 dir port learner node_a others=() start frozen end hedged
  dir=$(mktemp -d) port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
  start=$(date +%s.%N)
  "$bin" --model.preset tiny --train.warm_start_steps 0 --train.steps "$steps" --train.prompts_per_step 8 \
    --train.prompts_per_part 2 --generation.num_generations 4 --train.eval_every 0 --train.checkpoint_every 0 \
    --output.sample_every 0 --output.dir "$dir" --output.name run --train.guard warn --cluster.request_timeout 2m \
    --role learner --cluster.port "$port" --cluster.min_generators "$min_gens" --cluster.hedge="$hedge" >"$dir/learner.log" 2>&1 &
  learner=$!
  if [[ $frozen_role == generator ]]; then
    "$bin" --role generator --cluster.seeds "127.0.0.1:$port" >"$dir/gen-a.log" 2>&1 &
    node_a=$!
    "$bin" --role generator --cluster.seeds "127.0.0.1:$port" >"$dir/gen-b.log" 2>&1 &
    others+=($!)
    "$bin" --role reward,reference --cluster.seeds "127.0.0.1:$port" >"$dir/rr.log" 2>&1 &
    others+=($!)
  else # both reward+reference nodes in before the generators the run waits for
    "$bin" --role reward,reference --cluster.seeds "127.0.0.1:$port" >"$dir/rr-a.log" 2>&1 &
    node_a=$!
    "$bin" --role reward,reference --cluster.seeds "127.0.0.1:$port" >"$dir/rr-b.log" 2>&1 &
    others+=($!)
    until [[ $(grep -ho 'joined run' "$dir/rr-a.log" "$dir/rr-b.log" 2>/dev/null | wc -l) -ge 2 ]]; do sleep 0.02; done
    "$bin" --role generator --cluster.generators "$gens" --cluster.seeds "127.0.0.1:$port" >"$dir/gen.log" 2>&1 &
    others+=($!)
  fi
  until [[ $(cat "$dir/run/metrics.jsonl" 2>/dev/null | wc -l) -ge 6 ]]; do sleep 0.02; done
  frozen=$(date +%s.%N)
  kill -STOP "$node_a"
  for ((i = 0; i < freeze * 50; i++)); do kill -0 "$learner" 2>/dev/null || break; sleep 0.02; done
  kill -CONT "$node_a"
  while kill -0 "$learner" 2>/dev/null; do sleep 0.01; done
  end=$(date +%s.%N)
  hedged=$(grep -o '"cluster/hedged_parts":[0-9]*' "$dir/run/metrics.jsonl" | tail -1 | cut -d: -f2 || true)
  printf 'hedge %-5s  freeze to end %6.2f s  run %6.2f s  hedged parts %s\n' "$hedge" \
    "$(echo "$end - $frozen" | bc)" "$(echo "$end - $start" | bc)" "${hedged:-0}"
  kill "$node_a" "${others[@]}" 2>/dev/null || true
  wait 2>/dev/null || true
  rm -rf "$dir"
}

for ((r = 1; r <= rounds; r++)); do
  round true
  round false
done
