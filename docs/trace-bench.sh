#!/usr/bin/env bash
# Tracing overhead (docs/BENCHMARKS.md, "Tracing"): step time of the default recipe with
# tracing off, with every step exported over OTLP to a real Jaeger (make jaeger), and with
# every step written to a JSONL file. The three run in interleaved rounds (off, otlp, file,
# off, ...) from one warm start (model.checkpoint), so machine noise hits each alike; the
# figure is the median RL step time of all rounds of a mode (the first step of each run,
# which starts the actors, left out).
# Usage: docs/trace-bench.sh [STEPS] [ROUNDS]   (from the repository root; needs make build jaeger)
set -euo pipefail
steps=${1:-60}
rounds=${2:-3}
bin=$PWD/bin/mgrpo-node
work=$(mktemp -d)
trap 'kill $(jobs -p) 2>/dev/null || true; rm -rf "$work"' EXIT
.tools/bin/jaeger --config file:.tools/jaeger-local.yaml >"$work/jaeger.log" 2>&1 &
until curl -sf http://127.0.0.1:16686/api/services >/dev/null; do sleep 0.2; done

echo "# $(lscpu | sed -n 's/^Model name: *//p'), $(nproc) cores, load $(cut -d' ' -f1-3 /proc/loadavg)"
"$bin" --output.dir "$work" --output.name warm --train.steps 1 >/dev/null
common=(--model.checkpoint "$work/warm/reference" --train.steps "$steps" --train.eval_every 0
  --train.checkpoint_every 0 --output.sample_every 0 --output.dir "$work")
for r in $(seq "$rounds"); do
  "$bin" "${common[@]}" --output.name "off-$r" >/dev/null
  "$bin" "${common[@]}" --output.name "otlp-$r" --trace.otlp_endpoint 127.0.0.1:4317 --trace.sample_ratio 1 >/dev/null
  "$bin" "${common[@]}" --output.name "file-$r" --trace.file "$work/spans-$r.jsonl" --trace.sample_ratio 1 >/dev/null
done
python3 - "$work" "$rounds" <<'PY'
import json, statistics, sys
work, rounds = sys.argv[1], int(sys.argv[2])
def times(name):
    recs = [json.loads(l) for l in open(f"{work}/{name}/metrics.jsonl")]
    return [r["time/step_s"] for r in recs if r["step"] > 1]
med = {m: statistics.median(t for r in range(1, rounds + 1) for t in times(f"{m}-{r}")) for m in ("off", "otlp", "file")}
traced = sum(1 for r in range(1, rounds + 1) for l in open(f"{work}/otlp-{r}/metrics.jsonl") if "trace_id" in json.loads(l))
for m, v in med.items():
    print(f"{m:5s} median step {1e3 * v:7.1f} ms   ratio to off {v / med['off']:.3f}")
print(f"otlp runs: {traced} metrics lines carry a trace id")
PY
curl -s 'http://127.0.0.1:16686/api/traces?service=mgrpo&limit=1000&lookback=1h' |
  python3 -c 'import json,sys; d=json.load(sys.stdin)["data"]; print("jaeger holds", len(d), "traces,", sum(len(t["spans"]) for t in d), "spans")'
echo "# load after: $(cut -d' ' -f1-3 /proc/loadavg)"
