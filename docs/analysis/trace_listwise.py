#!/usr/bin/env python3
"""Trace a listwise MaxEnt run step by step (docs/RESULTS.md §5).

  trace_listwise.py BIN RUN_DIR OUT.json [--every N]

RUN_DIR must have been trained with --output.sample_every=1,
--output.sample_rows=<all completions> and --train.checkpoint_every=1, so that
samples/step_S.json holds every completion of step S and checkpoints/step-(S-1)
(reference/ for S = 1) is the policy that sampled them. For every step the
script re-scores the completions with that policy (`mgrpo-node score`) and
recomputes the listwise loss's gradient on the sequence log-probs S_i:

  dL/dS_i = [ (p_i - w_i) - c (w_i - b) ] / G_active    (on-policy, ratio 1)

p = softmax(S) over the group, w the listwise weights, c the clip-objective
coefficient (1 in the recipes), b = 1/K, G_active the groups with non-flat
weights. Gradient descent moves S by -lr * dL/dS, so cov(S, dL/dS) > 0 means
the step makes the group's sequence log-probs more equal (flattening).
"""
import json, math, os, subprocess, sys, tempfile
import numpy as np

def ids(text):
    return [ord(c) - 32 + 3 for c in text]

def score(bin_, ckpt, rows, max_len):
    with tempfile.NamedTemporaryFile("w", suffix=".jsonl", delete=False) as f:
        for r in rows:
            prompt, comp = r[5], r[6]
            cids = ids(comp) if len(comp) >= max_len else ids(comp) + [2]
            f.write(json.dumps({"prompt_ids": [1] + ids(prompt), "completion_ids": cids}) + "\n")
        path = f.name
    out = subprocess.run([bin_, "score", "--checkpoint", ckpt, "--input", path], capture_output=True, text=True, check=True).stdout
    os.unlink(path)
    return [json.loads(l) for l in out.splitlines()]

def main():
    bin_, run, outp = sys.argv[1:4]
    every = int(sys.argv[sys.argv.index("--every") + 1]) if "--every" in sys.argv else 1
    cfg = open(os.path.join(run, "config.yaml")).read()
    def cfgval(key, default):
        for line in cfg.splitlines():
            if line.strip().startswith(key + ":"):
                return line.split(":", 1)[1].split("#")[0].strip()
        return default
    max_len = int(cfgval("max_completion_len", 8))
    clip = 1.0 if cfgval("clip_objective", "false") == "true" else 0.0
    metrics = {json.loads(l)["step"]: json.loads(l) for l in open(os.path.join(run, "metrics.jsonl")) if '"step"' in l}
    steps = sorted(int(f[5:11]) for f in os.listdir(os.path.join(run, "samples")))
    res = []
    for s in steps:
        if s % every:
            continue
        ckpt = os.path.join(run, "reference") if s == 1 else os.path.join(run, "checkpoints", "step-%d" % (s - 1))
        if not os.path.isdir(ckpt):
            continue
        d = json.load(open(os.path.join(run, "samples", "step_%06d.json" % s)))
        rows = d["data"]
        k = rows[0][3]
        sc = score(bin_, ckpt, rows, max_len)
        S = np.array([x["sum_logprob"] / max(len(x["logprobs"]), 1) for x in sc])
        w = np.array([r[10] for r in rows]); r_ = np.array([r[7] for r in rows])
        G = len(rows) // k
        S, w, r_ = S.reshape(G, k), w.reshape(G, k), r_.reshape(G, k)
        active = (w.max(1) - w.min(1)) > 1e-8
        na = max(active.sum(), 1)
        p = np.exp(S - S.max(1, keepdims=True)); p /= p.sum(1, keepdims=True)
        g = ((p - w) - clip * (w - 1.0 / k)) / na
        g[~active] = 0
        cov = [np.mean((S[i] - S[i].mean()) * (g[i] - g[i].mean())) for i in range(G) if active[i]]
        corr = r_ >= 1
        top = S.argmax(1)
        m = metrics.get(s, {})
        hw = -(w * np.log(np.maximum(w, 1e-12))).sum(1)
        res.append({
            "step": s,
            "active_groups": int(active.sum()),
            "weight_entropy_active": float(hw[active].mean()) if active.any() else None,
            "kl_w_uniform_active": float((math.log(k) - hw[active]).mean()) if active.any() else None,
            "flatten_frac": float(np.mean([c > 0 for c in cov])) if cov else None,
            "cov_S_grad": float(np.mean(cov)) if cov else None,
            "grad_correct_mean": float(g[active][corr[active]].mean()) if (corr[active]).any() else None,
            "frac_correct_pushed_down": float((g[active][corr[active]] > 0).mean()) if (corr[active]).any() else None,
            "grad_mode_mean": float(np.mean([g[i, top[i]] for i in range(G) if active[i]])) if active.any() else None,
            "p_mode_mean": float(np.mean([p[i, top[i]] for i in range(G) if active[i]])) if active.any() else None,
            "w_mode_mean": float(np.mean([w[i, top[i]] for i in range(G) if active[i]])) if active.any() else None,
            "S_mean": float(S.mean()),
            "policy_entropy": m.get("train/policy_entropy"),
            "weight_entropy": m.get("train/weight_entropy"),
            "tau": m.get("train/tau"),
            "reward": m.get("train/reward"),
            "accuracy": m.get("train/accuracy"),
            "kl": m.get("train/kl"),
            "grad_norm": m.get("train/grad_norm"),
            "greedy": m.get("eval/greedy_accuracy"),
        })
    json.dump(res, open(outp, "w"), indent=0)

if __name__ == "__main__":
    main()
