"""Writes the parity fixtures of gpu/testdata/qwen with the PyTorch peer.

usage: /usr/bin/python3 make_fixtures.py PEER_DIR OUT_DIR

For each fixture, OUT_DIR/NAME/ gets the peer's checkpoint (config.json,
model.safetensors: `llama_ref.py init` with --std 0.2 --norm-jitter 0.1)
and scores.json: the peer's per-token log-probs and entropies of a few
fixed sequences at temperatures 1 and 0.7 (see README.md for the format).
The mgrpo-* fixtures go the other way: their checkpoints are mgrpo's
(make-fixtures.sh has the Go test TestWriteMgrpoFixtures write them
first), and this script only loads them into the peer and scores them.

The peer does not implement llama3 RoPE scaling: for the llama3-rope
fixture this script sets the peer's inverse frequencies to the llama3
rule (transformers' rope_utils, written out below) before scoring.

Each fixture must be able to fail: the script scores it again without
the feature it tests (biases zeroed, q/k norms set to one, RoPE
unscaled) and stops if that changes no log-prob by more than 1e-3.
"""
import copy
import json
import math
import os
import sys

import torch

SIZES = dict(vocab_size=32, hidden_size=16, intermediate_size=32, num_hidden_layers=2, max_position_embeddings=64)  # or overridden
LLAMA3 = dict(rope_type="llama3", factor=8.0, low_freq_factor=1.0, high_freq_factor=4.0,
              original_max_position_embeddings=32)
FIXTURES = [
    # name, seed, config overrides (beside SIZES), ablation
    ("qwen2-tied", 1, dict(model_type="qwen2", num_attention_heads=2, num_key_value_heads=1,
                           tie_word_embeddings=True, rope_theta=1000000.0), "bias"),
    ("qwen2-untied", 2, dict(model_type="qwen2", num_attention_heads=4, num_key_value_heads=2,
                             tie_word_embeddings=False), "bias"),
    ("qwen3", 3, dict(model_type="qwen3", num_attention_heads=2, num_key_value_heads=1, head_dim=12,
                      tie_word_embeddings=True, rope_theta=1000000.0), "qk_norm"),
    ("llama3-rope", 4, dict(model_type="llama", num_attention_heads=2, num_key_value_heads=2,
                            tie_word_embeddings=False, rope_theta=100.0, rope_scaling=LLAMA3), "rope"),
    # head widths the CUDA engine's attention kernels take (16, 32, 64, 128): the same parity on the device
    ("qwen2-e16", 5, dict(model_type="qwen2", hidden_size=32, num_attention_heads=2, num_key_value_heads=1,
                          tie_word_embeddings=True, rope_theta=1000000.0), "bias"),
    ("qwen3-e32", 6, dict(model_type="qwen3", num_attention_heads=2, num_key_value_heads=1, head_dim=32,
                          tie_word_embeddings=False, rope_theta=1000000.0), "qk_norm"),
    ("llama3-rope-e16", 7, dict(model_type="llama", hidden_size=32, num_attention_heads=2, num_key_value_heads=1,
                                tie_word_embeddings=False, rope_theta=100.0, rope_scaling=LLAMA3), "rope"),
]
# the checkpoints mgrpo writes (gpu/archfixture_test.go mgrpoFixtures): name, seed of the sequences, ablation
MGRPO_FIXTURES = [("mgrpo-qwen2", 11, "bias"), ("mgrpo-qwen3", 12, "qk_norm"), ("mgrpo-llama3-rope", 13, "rope")]
SEQUENCES = [(6, 10), (3, 25), (10, 50)]  # (prompt, completion) lengths; the longest reaches position 59
TEMPERATURES = [1.0, 0.7]


def llama3_inv_freq(head_dim, theta, s):
    """transformers' llama3 rule, in float64: wavelengths under original/high kept, over original/low
    divided by factor, linear in original/wavelength between."""
    out = []
    for i in range(0, head_dim, 2):
        f = theta ** (-i / head_dim)
        wavelen = 2 * math.pi / f
        orig = s["original_max_position_embeddings"]
        if wavelen < orig / s["high_freq_factor"]:
            out.append(f)
        elif wavelen > orig / s["low_freq_factor"]:
            out.append(f / s["factor"])
        else:
            t = (orig / wavelen - s["low_freq_factor"]) / (s["high_freq_factor"] - s["low_freq_factor"])
            out.append((1 - t) * f / s["factor"] + t * f)
    return out


def score(ref, model, seqs):
    runs = []
    for temp in TEMPERATURES:
        out = []
        with torch.no_grad():
            for prompt, completion in seqs:
                ids = torch.tensor([prompt + completion])
                lp, ent = ref.token_logprobs(model, ids, temperature=temp, with_entropy=True)
                out.append({"prompt": prompt, "completion": completion,
                            "logprobs": lp[0, len(prompt):].tolist(), "entropy": ent[0, len(prompt):].tolist()})
        runs.append({"temperature": temp, "sequences": out})
    return runs


def ablate(model, what):
    """The model without the feature its fixture tests."""
    m = copy.deepcopy(model)
    with torch.no_grad():
        for name, p in m.named_parameters():
            if what == "bias" and name.endswith("_proj.bias"):
                p.zero_()
            if what == "qk_norm" and (name.endswith("q_norm.weight") or name.endswith("k_norm.weight")):
                p.fill_(1.0)
    if what == "rope":
        c = m.cfg
        m.inv_freq = 1.0 / (c.theta ** (torch.arange(0, c.hd, 2).double() / c.hd)).float()
    return m


def max_diff(a, b):
    return max(abs(x - y) for ra, rb in zip(a, b) for sa, sb in zip(ra["sequences"], rb["sequences"])
               for x, y in zip(sa["logprobs"], sb["logprobs"]))


def set_rope(model):
    """The peer's RoPE frequencies, set to the llama3 rule when config.json has rope_scaling (the peer
    itself ignores it); returns them in float64."""
    c = model.cfg
    inv_freq = [c.theta ** (-i / c.hd) for i in range(0, c.hd, 2)]
    if c.raw.get("rope_scaling"):
        inv_freq = llama3_inv_freq(c.hd, c.theta, c.raw["rope_scaling"])
        model.inv_freq = torch.tensor(inv_freq, dtype=torch.float64).float()
    return inv_freq


def write_scores(ref, d, name, model, seed, ablation, checkpoint):
    """Scores fixed sequences with the peer and writes d/scores.json; refuses a fixture whose feature
    moves no log-prob by more than 1e-3."""
    c = model.cfg
    inv_freq = set_rope(model)
    g = torch.Generator().manual_seed(100 + seed)
    seqs = [(torch.randint(0, c.V, (p,), generator=g).tolist(), torch.randint(0, c.V, (n,), generator=g).tolist())
            for p, n in SEQUENCES]
    runs = score(ref, model, seqs)
    diff = max_diff(runs, score(ref, ablate(model, ablation), seqs))
    if diff <= 1e-3:
        sys.exit(f"{name}: without {ablation} the log-probs move by only {diff:.2g}: the fixture cannot fail")
    doc = {"peer": "llama_ref.py", "checkpoint": checkpoint, "std": 0.2, "norm_jitter": 0.1, "seed": seed,
           "inv_freq": inv_freq, "ablation": {"without": ablation, "max_logprob_diff": diff}, "runs": runs}
    with open(os.path.join(d, "scores.json"), "w") as f:
        json.dump(doc, f, indent=1)
        f.write("\n")
    print(f"{name}: {c.arch}, head_dim {c.hd}; without {ablation} log-probs move by up to {diff:.3g}")


def make(ref, out_dir, name, seed, overrides, ablation):
    d = os.path.join(out_dir, name)
    model = ref.init_checkpoint(d, "tiny", seed=seed, std=0.2, norm_jitter=0.1, **dict(SIZES, **overrides))
    write_scores(ref, d, name, model, seed, ablation, "llama_ref.py init")


def score_mgrpo(ref, out_dir, name, seed, ablation):
    d = os.path.join(out_dir, name)
    write_scores(ref, d, name, ref.load_checkpoint(d), seed, ablation, "mgrpo SaveCheckpoint (TestWriteMgrpoFixtures)")


def main():
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    sys.path.insert(0, os.path.abspath(sys.argv[1]))
    import llama_ref as ref
    torch.manual_seed(0)
    for name, seed, overrides, ablation in FIXTURES:
        make(ref, sys.argv[2], name, seed, overrides, ablation)
    for name, seed, ablation in MGRPO_FIXTURES:
        score_mgrpo(ref, sys.argv[2], name, seed, ablation)


if __name__ == "__main__":
    main()
