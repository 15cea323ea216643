#!/usr/bin/python3
"""Times one GPT-2 training step (forward, backward, AdamW) in PyTorch on the CPU: the baseline for the CPU backend.

It uses dev/reference/gpt2_reference.py's model (the same ops as llmc/model.h: manual causal attention, tanh GELU,
weight tying, padded vocabulary) at the shape given, random tokens, fp32, and prints one JSON line with the median
step time over --steps timed steps after --warmup untimed ones.
"""
import argparse
import json
import os
import sys
import time

import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "reference"))
import gpt2_reference as ref  # noqa: E402


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--layers", type=int, default=6)
    ap.add_argument("--heads", type=int, default=6)
    ap.add_argument("--channels", type=int, default=384)
    ap.add_argument("--vocab", type=int, default=50257)
    ap.add_argument("--batch", type=int, default=4)
    ap.add_argument("--seq-len", type=int, default=256)
    ap.add_argument("--threads", type=int, default=os.cpu_count())
    ap.add_argument("--warmup", type=int, default=1)
    ap.add_argument("--steps", type=int, default=5)
    a = ap.parse_args()
    torch.set_num_threads(a.threads)
    cfg = {"L": a.layers, "NH": a.heads, "C": a.channels, "maxT": a.seq_len, "V": a.vocab,
           "Vp": ref.pad_vocab(a.vocab)}
    p = {n: t.requires_grad_(True) for n, t in ref.init_params(cfg, 1, False).items()}
    g = torch.Generator().manual_seed(2)
    inputs = torch.randint(0, a.vocab, (a.batch, a.seq_len), generator=g)
    targets = torch.randint(0, a.vocab, (a.batch, a.seq_len), generator=g)
    groups = [{"params": [p[n] for n in ref.NAMES if n in ref.DECAYED], "weight_decay": 0.1},
              {"params": [p[n] for n in ref.NAMES if n not in ref.DECAYED], "weight_decay": 0.0}]
    opt = torch.optim.AdamW(groups, lr=1e-4, betas=(0.9, 0.95), eps=1e-8)
    times = []
    for i in range(a.warmup + a.steps):
        t0 = time.perf_counter()
        opt.zero_grad(set_to_none=True)
        _, loss = ref.forward(p, cfg, inputs, targets)
        loss.backward()
        torch.nn.utils.clip_grad_norm_([p[n] for n in ref.NAMES], 1.0)
        opt.step()
        if i >= a.warmup:
            times.append((time.perf_counter() - t0) * 1e3)
    times.sort()
    ms = times[len(times) // 2]
    print(json.dumps({"impl": "pytorch %s" % torch.__version__, "threads": a.threads, "ms": ms,
                      "tokens_per_sec": a.batch * a.seq_len / (ms / 1e3)}))


if __name__ == "__main__":
    main()
