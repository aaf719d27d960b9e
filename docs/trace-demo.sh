#!/usr/bin/env bash
# make trace-demo: Jaeger (make jaeger) on 127.0.0.1, a learner, a generator node and a
# reward+reference node traced into it for 60 steps of the tiny preset, then the slowest steps.
set -euo pipefail
bin=$PWD/bin/mgrpo-node
work=$(mktemp -d)
trap 'kill $(jobs -p) 2>/dev/null || true; rm -rf "$work"' EXIT
.tools/bin/jaeger --config file:.tools/jaeger-local.yaml >"$work/jaeger.log" 2>&1 &
until curl -sf http://127.0.0.1:16686/api/services >/dev/null; do sleep 0.2; done
seed=127.0.0.1:6330
"$bin" --role generator --cluster.seeds $seed >"$work/gen.log" 2>&1 &
"$bin" --role reward,reference --cluster.seeds $seed >"$work/rr.log" 2>&1 &
"$bin" --role learner --model.preset tiny --train.warm_start_steps 0 --train.steps 60 \
  --output.dir "$work" --output.name demo --trace.otlp_endpoint 127.0.0.1:4317 \
  --train.guard warn  # an untrained tiny policy earns no reward: warn, do not stop the demo
kill -INT $(jobs -p | tail -2) && sleep 2
"$bin" traces --slow --run demo --limit 3 --html trace-demo.html
echo "waterfall of the slowest steps: trace-demo.html (Jaeger stops with the demo; start it yourself to keep it)"
