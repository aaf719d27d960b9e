#!/usr/bin/env python3
# The PyTorch side of BenchmarkDrawToken (docs/BENCHMARKS.md, "Top-k and top-p on a real
# vocabulary"): one draw from one Zipf-like logits row, as Hugging Face generate samples it
# (temperature, then top-k, then top-p: the k-th largest kept with its ties; the sorted
# cumulative mass beyond 1 - top_p kept; softmax; multinomial), plus the full-vocabulary
# log-softmax mgrpo's draw also returns. One thread, medians of 30 after 3 warm-ups.
# Usage: /usr/bin/python3 docs/analysis/draw-peer.py   (needs torch)
import math, time, torch
torch.set_num_threads(1)
g = torch.Generator().manual_seed(1)
for V in (49152, 151936):
    perm = torch.randperm(V, generator=g)
    z = (-1.1 * torch.log((perm + 1).double())).float().unsqueeze(0)
    for T, k, p in ((1.0, 0, 1.0), (0.7, 0, 0.9), (1.0, 50, 1.0)):
        def draw():
            s = z / T
            if k:
                kth = torch.topk(s, k)[0][..., -1, None]
                s = s.masked_fill(s < kth, -float("inf"))
            if p < 1:
                sl, si = torch.sort(s, descending=False)
                cp = sl.softmax(dim=-1).cumsum(dim=-1)
                rm = cp <= (1 - p)
                rm[..., -1:] = 0
                s = s.masked_fill(rm.scatter(1, si, rm), -float("inf"))
            probs = s.softmax(dim=-1)
            torch.multinomial(probs, 1, generator=g)
            torch.log_softmax(z / T, dim=-1)  # the full-vocabulary log-prob and entropy mgrpo also returns
        for _ in range(3): draw()
        ts = []
        for _ in range(30):
            t0 = time.perf_counter(); draw(); ts.append(time.perf_counter() - t0)
        ts.sort()
        print("V=%d T=%g top_k=%d top_p=%g: %.3f ms" % (V, T, k, p, 1e3 * ts[len(ts) // 2]))
