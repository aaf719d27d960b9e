#!/usr/bin/env python3
"""The signals a collapse/no-signal guard would watch, over every run of
docs/maxent.sh (docs/RESULTS.md §5): for each run, the extreme of each
windowed signal, and the first step where each proposed rule fires.

  guards.py OUT
"""
import json, math, os, sys

out = sys.argv[1]
runs = os.path.join(out, "runs")
LN_K, LN_V = math.log(8), math.log(98)

def metrics(name):
    rows = [json.loads(l) for l in open(os.path.join(runs, name, "metrics.jsonl"))]
    return [r for r in rows if "step" in r]

def window(rows, i, n):
    return rows[max(0, i - n + 1): i + 1]

def mean(xs):
    xs = [x for x in xs if x is not None]
    return sum(xs) / len(xs) if xs else float("nan")

# The proposed rules (checked once per step on the last n steps).
def rules(rows):
    fired = {}
    base = mean(r.get("train/policy_entropy") for r in rows[:20])
    for i, r in enumerate(rows):
        s = r["step"]
        w20, w50 = window(rows, i, 20), window(rows, i, 50)
        ent = mean(x.get("train/policy_entropy") for x in w20)
        if ent > max(2 * base, 0.5 * LN_V):
            fired.setdefault("entropy_warn", s)
        if ent > 0.8 * LN_V:
            fired.setdefault("entropy_stop", s)
        if len(w50) == 50:
            wh = [x["train/weight_entropy"] for x in w50 if "train/weight_entropy" in x and x.get("train/grad_norm", 1) > 0]
            if wh and mean(wh) >= LN_K - 0.08:
                fired.setdefault("weights_uniform", s)
            skipped = sum(1 for x in w50 if x.get("train/frac_reward_zero_std", 0) >= 1 or x.get("train/grad_norm", 1) == 0)
            if skipped >= 10:
                fired.setdefault("skipped_warn", s)
            if skipped >= 25:
                fired.setdefault("skipped_stop", s)
            if sum(x.get("train/accuracy", 0) for x in w50) == 0:
                fired.setdefault("no_correct", s)
            if mean(x.get("train/reward") for x in w50) < 0.01:
                fired.setdefault("reward_zero", s)
    return fired

names = sorted(n for n in os.listdir(runs) if os.path.exists(os.path.join(runs, n, "metrics.jsonl")) and not n.startswith("trace"))
print("| run | steps | max 20-step policy entropy | max KL | max 50-step weight entropy | most skipped steps in 50 | rules fired (first step) |")
print("|---|---|---|---|---|---|---|")
for n in names:
    rows = metrics(n)
    if not rows:
        continue
    ent = max(mean(x.get("train/policy_entropy") for x in window(rows, i, 20)) for i in range(len(rows)))
    kl = max((r.get("train/kl", 0) for r in rows), default=0)
    wh = [mean(x.get("train/weight_entropy") for x in window(rows, i, 50)) for i in range(49, len(rows))]
    skipped = max((sum(1 for x in window(rows, i, 50) if x.get("train/frac_reward_zero_std", 0) >= 1 or x.get("train/grad_norm", 1) == 0) for i in range(len(rows))), default=0)
    f = rules(rows)
    print("| %s | %d | %.2f | %.2f | %s | %d | %s |" % (n, rows[-1]["step"], ent, kl, "%.2f" % max(wh) if wh and not math.isnan(max(wh)) else "-", skipped,
          ", ".join("%s %d" % kv for kv in sorted(f.items(), key=lambda kv: kv[1])) or "none"))
