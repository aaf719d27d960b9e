#!/usr/bin/env python3
"""Figures of docs/RESULTS.md §5–§6 from the runs docs/maxent.sh made.

  plots.py OUT RUNS_DIR FIGURE_DIR

needs python3-numpy and python3-matplotlib (Debian).
"""
import json, os, sys
import numpy as np
import matplotlib
matplotlib.use("Agg")
import matplotlib.pyplot as plt

out, runs, figs = sys.argv[1:4]
os.makedirs(figs, exist_ok=True)

def metrics(name):
    rows = [json.loads(l) for l in open(os.path.join(runs, name, "metrics.jsonl"))]
    return [r for r in rows if "step" in r]

def series(rows, key):
    s = np.array([r["step"] for r in rows if key in r])
    v = np.array([r[key] for r in rows if key in r])
    return s, v

def smooth(v, n=10):
    """Trailing mean over the last n values (fewer at the start), NaN-aware."""
    v = np.asarray(v, dtype=float)
    out = np.full(len(v), np.nan)
    for i in range(len(v)):
        w = v[max(0, i - n + 1): i + 1]
        w = w[~np.isnan(w)]
        if len(w):
            out[i] = w.mean()
    return out

# Figure 1: one collapsing run traced step by step (addition, weak warm start, the original's preset).
def trace_figure(trace_json, name, title, path):
    tr = json.load(open(trace_json))
    rows = metrics(name)
    st = np.array([t["step"] for t in tr])
    fig, ax = plt.subplots(2, 2, figsize=(10, 6.5), sharex=True)
    s, v = series(rows, "train/policy_entropy")
    ax[0, 0].plot(s, v, label="policy entropy / token")
    s, v = series(rows, "train/kl")
    ax[0, 0].plot(s, v, label="KL to reference / token")
    ax[0, 0].axhline(np.log(98), ls=":", c="gray", label="ln 98 (uniform)")
    ax[0, 0].set_ylabel("nats"); ax[0, 0].legend(fontsize=8); ax[0, 0].set_title("policy")
    s, v = series(rows, "train/weight_entropy")
    ax[0, 1].plot(s, v, label="weight entropy, all groups (controller input)")
    a = np.array([np.nan if t["weight_entropy_active"] is None else t["weight_entropy_active"] for t in tr])
    ax[0, 1].plot(st, a, label="weight entropy, trained groups")
    s, v = series(rows, "train/tau")
    ax[0, 1].plot(s, v, label="tau")
    ax[0, 1].axhline(np.log(8), ls=":", c="gray", label="ln 8 (uniform)")
    ax[0, 1].set_title("weights"); ax[0, 1].legend(fontsize=8)
    f = np.array([np.nan if t["flatten_frac"] is None else t["flatten_frac"] for t in tr])
    ax[1, 0].plot(st, smooth(f), label="groups whose step equalises their log-probs (10-step mean)")
    pm = np.array([np.nan if t["p_mode_mean"] is None else t["p_mode_mean"] for t in tr])
    wm = np.array([np.nan if t["w_mode_mean"] is None else t["w_mode_mean"] for t in tr])
    ax[1, 0].plot(st, smooth(pm), label="p of each group's likeliest completion")
    ax[1, 0].plot(st, smooth(wm), label="its weight w")
    ax[1, 0].set_xlabel("RL step"); ax[1, 0].legend(fontsize=8); ax[1, 0].set_title("listwise gradient on sequence log-probs")
    s, v = series(rows, "train/accuracy")
    ax[1, 1].plot(s, smooth(v), label="sampled accuracy (10-step mean)")
    s, v = series(rows, "train/frac_reward_zero_std")
    ax[1, 1].plot(s, smooth(v), label="groups with equal rewards (skipped)")
    s, v = series(rows, "eval/greedy_accuracy")
    ax[1, 1].plot(s, v, "o-", ms=3, label="greedy accuracy")
    ax[1, 1].set_xlabel("RL step"); ax[1, 1].legend(fontsize=8); ax[1, 1].set_title("rewards")
    fig.suptitle(title)
    fig.tight_layout()
    fig.savefig(path, dpi=80)

trace_figure(os.path.join(out, "trace-add-preset-s1.json"), "trace-add-preset-s1",
             "addition, weak warm start, original preset (tau 0.5, q temp 2, beta 0), seed 1", os.path.join(figs, "collapse-trace.png"))
trace_figure(os.path.join(out, "trace-add-recipe-s1.json"), "trace-add-recipe-s1",
             "addition, weak warm start, new recipe (tau controller + beta 0.1), seed 1", os.path.join(figs, "recipe-trace.png"))

# Figure 2: policy entropy, preset against recipe, weak addition start, 3 seeds, 600 steps;
# and the tau controller on countdown (weight entropy against its target, tau).
if not os.path.exists(os.path.join(runs, "cd-preset-s3", "metrics.jsonl")):
    sys.exit(0)
fig, ax = plt.subplots(1, 3, figsize=(13, 3.8))
for s in (1, 2, 3):
    for obj, c in (("preset", "C3"), ("recipe", "C0")):
        rows = metrics("add-weak-%s-s%d" % (obj, s))
        x, v = series(rows, "train/policy_entropy")
        ax[0].plot(x, v, c=c, lw=1, label=obj if s == 1 else None)
ax[0].set_title("addition, weak start: policy entropy / token"); ax[0].set_xlabel("RL step"); ax[0].legend()
for s in (1, 2, 3):
    rows = metrics("cd-maxent_listwise-s%d" % s)
    x, v = series(rows, "train/weight_entropy")
    ax[1].plot(x, smooth(v, 20), lw=1, label="seed %d (20-step mean)" % s)
    x, v = series(rows, "train/tau")
    ax[2].plot(x, v, lw=1, label="seed %d" % s)
    rows = metrics("cd-preset-s%d" % s)
    x, v = series(rows, "train/weight_entropy")
    ax[1].plot(x, smooth(v, 20), lw=1, ls="--", c="gray", label="preset" if s == 1 else None)
ax[1].axhline(1.85, c="k", ls=":", label="target 1.85")
ax[1].axhline(np.log(8), c="gray", ls=":", label="ln 8")
ax[1].set_title("countdown: weight entropy"); ax[1].set_xlabel("RL step"); ax[1].legend(fontsize=7)
ax[2].set_title("countdown: tau"); ax[2].set_xlabel("RL step"); ax[2].legend(fontsize=7)
fig.tight_layout()
fig.savefig(os.path.join(figs, "controller.png"), dpi=80)
