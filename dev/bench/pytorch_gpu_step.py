#!/usr/bin/env python3
"""GPT-2 124M training throughput in PyTorch on a GPU: the baseline ./train_gpt2 is compared against
(docs/benchmarks.md).

A nanoGPT-style GPT-2 written here (tied embeddings, tanh GELU, padded vocabulary 50304, causal
scaled_dot_product_attention, i.e. flash attention), bf16 autocast, fused AdamW, torch.compile. Random tokens, so the
figures are pure throughput. Prints tokens/s (median step after warm-up), MFU against 989 TFLOP/s (H100 SXM dense
bf16; --peak to change) with the same FLOP count as the trainer (llm.c's 6 N + 6 L C T per token), and the peak memory.
"""
import argparse
import json
import math
import statistics
import time

import torch
import torch.nn as nn
import torch.nn.functional as F


class Block(nn.Module):
    def __init__(self, C, NH):
        super().__init__()
        self.ln1, self.ln2 = nn.LayerNorm(C), nn.LayerNorm(C)
        self.qkv, self.proj = nn.Linear(C, 3 * C), nn.Linear(C, C)
        self.fc, self.fcproj = nn.Linear(C, 4 * C), nn.Linear(4 * C, C)
        self.NH = NH

    def forward(self, x):
        B, T, C = x.shape
        q, k, v = self.qkv(self.ln1(x)).split(C, dim=2)
        q, k, v = (t.view(B, T, self.NH, C // self.NH).transpose(1, 2) for t in (q, k, v))
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True).transpose(1, 2).reshape(B, T, C)
        x = x + self.proj(y)
        return x + self.fcproj(F.gelu(self.fc(self.ln2(x)), approximate="tanh"))


class GPT(nn.Module):
    def __init__(self, L, NH, C, Vp, maxT):
        super().__init__()
        self.wte, self.wpe = nn.Embedding(Vp, C), nn.Embedding(maxT, C)
        self.blocks = nn.ModuleList(Block(C, NH) for _ in range(L))
        self.lnf = nn.LayerNorm(C)

    def forward(self, idx, targets):
        x = self.wte(idx) + self.wpe(torch.arange(idx.shape[1], device=idx.device))
        for b in self.blocks:
            x = b(x)
        logits = self.lnf(x) @ self.wte.weight.t()
        return F.cross_entropy(logits.float().view(-1, logits.shape[-1]), targets.view(-1))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--batch", type=int, default=16)
    ap.add_argument("--seq-len", type=int, default=1024)
    ap.add_argument("--steps", type=int, default=20)
    ap.add_argument("--peak", type=float, default=989e12)
    ap.add_argument("--no-compile", action="store_true")
    a = ap.parse_args()
    torch.manual_seed(0)
    L, NH, C, V, Vp, T = 12, 12, 768, 50257, 50304, a.seq_len
    model = GPT(L, NH, C, Vp, 1024).cuda()
    n_params = sum(p.numel() for p in model.parameters())
    opt = torch.optim.AdamW(model.parameters(), lr=6e-4, betas=(0.9, 0.95), weight_decay=0.1, fused=True)
    step_fn = model if a.no_compile else torch.compile(model)
    x = torch.randint(0, V, (a.batch, T), device="cuda")
    y = torch.randint(0, V, (a.batch, T), device="cuda")
    times = []
    for i in range(a.steps):
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        with torch.autocast("cuda", dtype=torch.bfloat16):
            loss = step_fn(x, y)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        opt.zero_grad(set_to_none=True)
        torch.cuda.synchronize()
        if i >= 3:  # compilation and warm-up
            times.append(time.perf_counter() - t0)
    s = statistics.median(times)
    tok_s = a.batch * T / s
    flops_token = 6 * n_params + 6 * L * C * T  # llm.c's formula, as train_gpt2's log states it
    print(json.dumps({"impl": "pytorch %s%s" % (torch.__version__, "" if a.no_compile else " compile"),
                      "batch": a.batch, "seq_len": T, "ms": s * 1e3, "tokens/s": round(tok_s),
                      "mfu": flops_token * tok_s / a.peak, "peak_mem_GiB": torch.cuda.max_memory_allocated() / 2**30,
                      "loss": loss.item(), "finite": math.isfinite(loss.item())}))


if __name__ == "__main__":
    main()
