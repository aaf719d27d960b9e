#!/usr/bin/env python3
"""Tables of docs/RESULTS.md §5–§7 (markdown on stdout) from docs/maxent.sh's OUT.

  summary.py OUT
"""
import json, math, os, statistics as st, sys

out = sys.argv[1]
runs = os.path.join(out, "runs")

def metrics(name):
    rows = [json.loads(l) for l in open(os.path.join(runs, name, "metrics.jsonl"))]
    return [r for r in rows if "step" in r]

def ev(name):
    return json.load(open(os.path.join(out, "evals", name + ".json")))

def have(name):
    return os.path.exists(os.path.join(runs, name, "metrics.jsonl"))

COLLAPSE = 2.0  # nats per token: collapsed runs reach ~4.4 (ln 98 = 4.58); healthy ones stay below 1.3

def run_line(name):
    rows = metrics(name)
    ent = [r.get("train/policy_entropy", float("nan")) for r in rows]
    first = next((r["step"] for r in rows if r.get("train/policy_entropy", 0) > COLLAPSE), None)
    zero = sum(1 for r in rows if r.get("train/grad_norm", 1) == 0)
    greedy = [r["eval/greedy_accuracy"] for r in rows if "eval/greedy_accuracy" in r]
    return max(ent), first, zero, greedy[-1] if greedy else float("nan")

def fmt(x, p=3):
    return "-" if x is None or (isinstance(x, float) and math.isnan(x)) else ("%.*f" % (p, x))

# §5: the trace, by phase.
for r in ("preset", "recipe"):
    path = os.path.join(out, "trace-add-%s-s1.json" % r)
    if not os.path.exists(path):
        continue
    tr = json.load(open(path))
    print("\nTrace, addition from the weak warm start, %s, seed 1, means by phase\n" % r)
    print("| steps | policy entropy | weight entropy (all groups) | weight entropy (trained groups) | KL(w‖uniform), trained groups | groups flattened | p / w of the likeliest completion | correct completions pushed down | sampled accuracy | trained groups |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for lo in range(0, 200, 25):
        ph = [t for t in tr if lo < t["step"] <= lo + 25]
        def m(k):
            v = [t[k] for t in ph if t.get(k) is not None]
            return st.mean(v) if v else None
        pw = "-" if m("p_mode_mean") is None else "%.2f / %.2f" % (m("p_mode_mean"), m("w_mode_mean"))
        print("| %d–%d | %s | %s | %s | %s | %s | %s | %s | %s | %s |" % (lo + 1, lo + 25, fmt(m("policy_entropy"), 2), fmt(m("weight_entropy"), 2),
              fmt(m("weight_entropy_active"), 2), fmt(m("kl_w_uniform_active"), 3), fmt(m("flatten_frac"), 2), pw,
              fmt(m("frac_correct_pushed_down"), 2), fmt(m("accuracy"), 3), fmt(m("active_groups"), 1)))

# §6a: the weak start, 600 steps.
if have("add-weak-preset-s1"):
    print("\nAddition from the weak warm start, 600 steps: largest policy entropy, first step above %.1f nats, steps with no gradient, last greedy accuracy\n" % COLLAPSE)
    print("| run | seed 1 | seed 2 | seed 3 |\n|---|---|---|---|")
    for r in ("preset", "recipe"):
        cells = []
        for s in (1, 2, 3):
            mx, first, zero, g = run_line("add-weak-%s-s%d" % (r, s))
            cells.append("%.2f, %s, %d, %.1f%%" % (mx, first or "never", zero, 100 * g))
        print("| %s | %s |" % (r, " | ".join(cells)))

KEYS = [("pass_at_k", "pass@8"), ("coverage", "coverage"), ("mean_at_k", "mean@8"), ("greedy_accuracy", "greedy"), ("entropy_per_token", "entropy/token")]

def table(title, warm, objs, prefix):
    print("\n%s\n" % title)
    print("| seed | policy | " + " | ".join(h for _, h in KEYS) + " | collapsed |")
    print("|" + "---|" * (len(KEYS) + 3))
    agg = {}
    for s in (1, 2, 3):
        for obj in [warm] + objs:
            name = (warm % s if "%d" in warm else warm) if obj == warm else "%s-%s-s%d" % (prefix, obj, s)
            if obj == warm and s > 1 and "%d" not in warm:
                continue  # one warm start shared by every seed
            if not os.path.exists(os.path.join(out, "evals", name + ".json")):
                continue
            d = ev(name)
            agg.setdefault(obj, []).append(d)
            col = "" if obj == warm else ("yes" if run_line(name)[1] else "no")
            print("| %d | %s | " % (s, "warm start" if obj == warm else obj) + " | ".join("%.3f" % d[k] for k, _ in KEYS) + " | %s |" % col)
    for obj, ds in agg.items():
        if len(ds) > 1:
            print("| mean ± sd | %s | " % ("warm start" if obj == warm else obj) + " | ".join("%.3f ± %.3f" % (st.mean(d[k] for d in ds), st.stdev([d[k] for d in ds])) for k, _ in KEYS) + " | |")
    for obj in objs[1:]:
        if obj in agg and "grpo" in agg:
            print("| %s − grpo, seeds 1/2/3 | | " % obj + " | ".join(" / ".join("%+.3f" % (a[k] - b[k]) for a, b in zip(agg[obj], agg["grpo"])) for k, _ in KEYS) + " | |")

if os.path.exists(os.path.join(out, "evals", "add-grpo-s1.json")):
    table("Addition, default warm start, 600 steps, `eval --n 2000 --k 8`", "add-warm", ["grpo", "maxent_listwise"], "add")
if os.path.exists(os.path.join(out, "evals", "cd-grpo-s1.json")):
    table("Countdown, 600 steps, `eval --n 2000 --k 8`", "cd-warm-s%d", ["grpo", "maxent_listwise", "preset"], "cd")

def tracking(name, target=1.85, start=100):
    # the controller's EMA (decay 0.9) of the step values, recomputed: metrics.jsonl has no controller block
    rows, ema, e = metrics(name), [], None
    for r in rows:
        if "train/weight_entropy" in r:
            e = r["train/weight_entropy"] if e is None else 0.9 * e + 0.1 * r["train/weight_entropy"]
        ema.append(e)
    ema = [x for r, x in zip(rows, ema) if r["step"] > start]
    rows = [r for r in rows if r["step"] > start]
    h = [r["train/weight_entropy"] for r in rows if "train/weight_entropy" in r]
    tau = [r["train/tau"] for r in rows]
    return st.mean(h), st.mean(abs(x - target) for x in ema), sum(abs(x - target) <= 0.1 for x in ema) / len(ema), min(tau), max(tau)

for prefix in ("cd", "add"):
    if have("%s-maxent_listwise-s1" % prefix):
        print("\nWeight entropy against its target 1.85 after step 100 (%s): mean of the step values, mean |EMA − target|, steps with the EMA within ±0.1, tau range\n" % prefix)
        print("| seed | mean H | mean abs(EMA − 1.85) | within ±0.1 | tau |\n|---|---|---|---|---|")
        for s in (1, 2, 3):
            h, e, w, lo, hi = tracking("%s-maxent_listwise-s%d" % (prefix, s))
            print("| %d | %.3f | %.3f | %.0f%% | %.3f–%.3f |" % (s, h, e, 100 * w, lo, hi))

# §6d: variants.
var = [("cd-maxent_listwise-s1", "recipe"), ("cd-target14-s1", "target 1.4"), ("cd-target10-s1", "target 1.0"),
       ("cd-nobeta-s1", "beta 0"), ("cd-meta-s1", "meta-controller on policy entropy 0.35"), ("cd-preset-s1", "original preset")]
if have("cd-target14-s1"):
    print("\nCountdown seed 1, variants of the recipe, 600 steps\n")
    print("| variant | " + " | ".join(h for _, h in KEYS) + " | tau at the end | steps with tau at its bound |\n|" + "---|" * (len(KEYS) + 3))
    for name, label in var:
        d = ev(name)
        rows = metrics(name)
        tau = [r["train/tau"] for r in rows]
        bound = sum(1 for t in tau if t <= 0.0201 or t >= 0.4999)
        print("| %s | " % label + " | ".join("%.3f" % d[k] for k, _ in KEYS) + " | %.3f | %d |" % (tau[-1], bound))
    print("\nAddition from the weak warm start, seed 1, 600 steps: largest policy entropy, first step above %.1f, zero-gradient steps, last greedy\n" % COLLAPSE)
    print("| variant | result |\n|---|---|")
    for name, label in (("add-weak-recipe-s1", "recipe"), ("add-weak-nobeta-s1", "tau controller from tau 0.5, beta 0"),
                        ("add-weak-beta05-s1", "original preset + beta 0.5"), ("add-weak-preset-s1", "original preset")):
        mx, first, zero, g = run_line(name)
        print("| %s | %.2f, %s, %d, %.1f%% |" % (label, mx, first or "never", zero, 100 * g))

# §7: harder settings.
if have("add3-grpo"):
    print("\nHarder settings, small preset\n")
    print("| setting | warm start | its greedy accuracy (eval, 2000) | RL | " + " | ".join(h for _, h in KEYS) + " |\n|" + "---|" * (len(KEYS) + 4))
    for warm, rl, steps in (("warm-add3", "add3-grpo", 200), ("warm-add3", "add3-maxent_listwise", 200), ("warm-cd4", "cd4-grpo", 600), ("warm-cd4", "cd4-maxent_listwise", 600)):
        log = open(os.path.join(out, warm + ".log")).read().replace("\r", "\n")
        done = [l for l in log.splitlines() if l.startswith("warm start done")]
        print("| %s | %s | %.3f | %s, %d steps | " % (warm[5:], done[-1][len("warm start done "):] if done else "?", ev(warm)["greedy_accuracy"], rl.split("-", 1)[1], steps)
              + " | ".join("%.3f" % ev(rl)[k] for k, _ in KEYS) + " |")
