#!/usr/bin/env bash
# soak.sh: a long run's memory, measured (docs/RELIABILITY.md, "Soak").
#
#   docs/soak.sh [BIN] [STEPS] [OUT]
#
# Trains the tiny preset for STEPS RL steps (default 3000; no warm start, a
# checkpoint, an evaluation and a report every 50 steps, a metrics line every
# step) with BIN (default: bin/mgrpo-node, built by `make build`) into OUT
# (default: a temporary directory), samples the process's VmRSS from
# /proc/PID/status every 2 s into OUT/rss.tsv (seconds, metrics lines so far,
# RSS in KiB), and prints the median and the largest RSS of each sixth of the
# run. Flat means the last sixth's median is within a few MB of the second's; the run page keeps
# every metrics line up to 4096, so use 12000 steps to see the plateau. Guards warn only: an
# untrained tiny policy earns no reward, which train.guard=stop would end at step 50.
set -euo pipefail
bin=${1:-bin/mgrpo-node}
steps=${2:-3000}
out=${3:-$(mktemp -d)}
mkdir -p "$out"
rm -rf "$out/soak"
"$bin" --model.preset tiny --train.warm_start_steps 0 --train.steps "$steps" \
  --train.checkpoint_every 50 --train.eval_every 50 --train.eval_prompts 16 \
  --train.guard warn --output.dir "$out" --output.name soak >"$out/stdout" 2>"$out/stderr" &
pid=$!
printf 'seconds\tlines\trss_kib\n' >"$out/rss.tsv"
start=$SECONDS
while kill -0 "$pid" 2>/dev/null; do
  rss=$(awk '/^VmRSS:/ {print $2}' "/proc/$pid/status" 2>/dev/null || true)
  lines=$( (wc -l <"$out/soak/metrics.jsonl") 2>/dev/null || echo 0)
  [ -n "$rss" ] && printf '%d\t%d\t%d\n' $((SECONDS - start)) "$lines" "$rss" >>"$out/rss.tsv"
  sleep 2
done
wait "$pid"
tail -1 "$out/stdout"
echo "RSS in MiB by sixth of the run (median, max), samples in $out/rss.tsv:"
T=$(tail -1 "$out/rss.tsv" | cut -f1)
for q in 0 1 2 3 4 5; do
  awk -F'\t' -v q="$q" -v T="$T" 'NR > 1 && $1 >= q * T / 6 && ($1 < (q + 1) * T / 6 || (q == 5 && $1 == T)) {print $3 / 1024}' \
    "$out/rss.tsv" | sort -n | awk -v q="$q" '{v[NR] = $1} END {printf "  %d/6: median %.1f  max %.1f  (%d samples)\n", q + 1, v[int((NR + 1) / 2)], v[NR], NR}'
done
