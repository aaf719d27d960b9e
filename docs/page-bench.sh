#!/usr/bin/env bash
# How fast a long run's page opens (docs/BENCHMARKS.md, "The run page"): a 3000-step run
# made from a real run's lines (RUN_DIR, e.g. runs/<name> of `make run`: its lines repeated
# to step 3000, an evaluation every 25 steps, a sample table every 10, its config and warm
# start), its page written by `mgrpo-node report`, then opened ROUNDS times in headless
# Chromium, interleaved with an empty page. The page records, on <body>, how long its script
# took (data-script-ms) and the time from navigation to the end of drawing (data-load-ms).
# Usage: docs/page-bench.sh RUN_DIR [ROUNDS]   (from the repository root; needs make build)
set -euo pipefail
src=$1
rounds=${2:-5}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
run=$work/synthetic-3000
mkdir -p "$run/samples"
python3 - "$src" "$run" <<'PY'
import glob, json, os, shutil, sys
src, dst = sys.argv[1:]
shutil.copy(f"{src}/config.yaml", dst)
shutil.copy(f"{src}/warm_start.jsonl", dst)
lines = [json.loads(l) for l in open(f"{src}/metrics.jsonl")]
evals = [l["eval/greedy_accuracy"] for l in lines[1:] if "eval/greedy_accuracy" in l]
with open(f"{dst}/metrics.jsonl", "w") as f:
    f.write(json.dumps(lines[0], separators=(",", ":")) + "\n")
    for s in range(1, 3001):
        l = dict(lines[1 + (s - 1) % (len(lines) - 1)], step=s)
        l.pop("eval/greedy_accuracy", None)
        if s % 25 == 0:
            l["eval/greedy_accuracy"] = evals[(s // 25 - 1) % len(evals)]
        f.write(json.dumps(l, separators=(",", ":")) + "\n")
tables = sorted(glob.glob(f"{src}/samples/step_*.json"))
for s in range(10, 3001, 10):
    shutil.copy(tables[(s // 10 - 1) % len(tables)], f"{dst}/samples/step_{s:06d}.json")
PY
bin/mgrpo-node report "$run" >/dev/null
echo '<!DOCTYPE html><html><body>empty</body></html>' >"$work/empty.html"
echo "# $(lscpu | sed -n 's/^Model name: *//p'), $(nproc) cores, load $(cut -d' ' -f1-3 /proc/loadavg)"
echo "# page $(du -h "$run/report.html" | cut -f1); chromium wall s (empty page, run page), page's own ms"
open() { chromium --headless --no-sandbox --disable-gpu --no-first-run --user-data-dir="$work/profile" --dump-dom "file://$1" 2>/dev/null; }
for r in $(seq "$rounds"); do
  t0=$(date +%s.%N); open "$work/empty.html" >/dev/null
  t1=$(date +%s.%N); open "$run/report.html" >"$work/dom.html"
  t2=$(date +%s.%N)
  echo "empty $(echo "$t1 - $t0" | bc) page $(echo "$t2 - $t1" | bc) $(grep -o 'data-script-ms="[^"]*" data-load-ms="[^"]*"' "$work/dom.html")"
done
