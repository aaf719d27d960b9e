#!/bin/sh
# peer-parity.sh: a checkpoint written by the PyTorch peer, sampled by the
# peer, scored by the peer (llama_ref.py score) and by bin/mgrpo-node score;
# prints the largest log-prob and entropy differences over all completion
# tokens for small and base at T = 1 and 0.7 (docs/BENCHMARKS.md, "Parity
# with the peer"). Usage: docs/analysis/peer-parity.sh [PEER_DIR] [NODE_BIN]
set -eu
P=${1:-../shared/peer}
NODE=${2:-bin/mgrpo-node}
PY=${PEER_PYTHON:-/usr/bin/python3}
D=$(mktemp -d)
trap 'rm -rf "$D"' EXIT
for preset in small base; do
	$PY "$P/llama_ref.py" init --preset $preset --out "$D/$preset" --vocab 98 --std 0.2 --norm-jitter 0.2 --seed 3 >/dev/null
	for temp in 1 0.7; do
		$PY "$P/llama_ref.py" sample --ckpt "$D/$preset" --out "$D/seqs.json" --n 64 --prompt-len 12 --new 20 --temperature $temp --seed 5 >/dev/null
		$PY "$P/llama_ref.py" score --ckpt "$D/$preset" --in "$D/seqs.json" --out "$D/peer.json" --temperature $temp >/dev/null
		$PY -c 'import json,sys
for s in json.load(open(sys.argv[1]))["sequences"]:
    print(json.dumps({"prompt_ids": s["tokens"][:s["start"]], "completion_ids": s["tokens"][s["start"]:]}))' "$D/seqs.json" >"$D/in.jsonl"
		"$NODE" score --checkpoint "$D/$preset" --input "$D/in.jsonl" --temperature $temp >"$D/ours.jsonl"
		$PY - "$D/peer.json" "$D/ours.jsonl" $preset $temp <<'PYEOF'
import json, sys
peer = json.load(open(sys.argv[1]))
ours = [json.loads(l) for l in open(sys.argv[2])]
def field(d, *names):
    for n in names:
        if n in d:
            return d[n]
    raise KeyError(names)
seqs = field(peer, "sequences", "results")
lp = ent = 0.0
n = 0
for p, o in zip(seqs, ours, strict=True):
    pl, pe = field(p, "logprobs", "log_probs"), field(p, "entropy", "entropies")
    ol, oe = field(o, "logprobs", "log_probs"), field(o, "entropies", "entropy")
    for a, b in zip(pl, ol, strict=True):
        lp = max(lp, abs(a - b))
    for a, b in zip(pe, oe, strict=True):
        ent = max(ent, abs(a - b))
    n += len(ol)
print(f"{sys.argv[3]} T={sys.argv[4]}: {n} tokens, largest difference log-prob {lp:.2g}, entropy {ent:.2g}")
PYEOF
	done
done
