#!/usr/bin/env python3
"""PyTorch's fused causal attention (scaled_dot_product_attention, is_causal=True, bf16) at GPT-2 124M's shapes.

The baseline for build/cuda-bench/attention (llmc/cuda/attention.cuh), run in the same GPU run by
dev/gpu/run_checks.sh: the same shapes (B = 64 by default, T = 1024, 12 heads of 64) and the same FLOP convention
(causal: forward 2 B NH T^2 hs, backward 2.5 x the forward). Inputs are random, laid out as the model's qkv (B, T, 3C)
viewed as (B, NH, T, hs) per tensor, as a GPT-2 block passes them. Prints one JSON line with the backend PyTorch
picked (flash / memory-efficient / math), ms and TFLOP/s for the forward and the backward.
"""
import argparse
import json

import torch
import torch.nn.functional as F


def time_ms(fn, iters=20):
    for _ in range(3):
        fn()
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    torch.cuda.synchronize()
    start.record()
    for _ in range(iters):
        fn()
    end.record()
    torch.cuda.synchronize()
    return start.elapsed_time(end) / iters


def backend_name(q, k, v):
    """The first fused backend that accepts these inputs, in PyTorch's order of preference."""
    from torch.nn.attention import SDPBackend, sdpa_kernel
    for name, b in (("flash", SDPBackend.FLASH_ATTENTION), ("cudnn", SDPBackend.CUDNN_ATTENTION),
                    ("efficient", SDPBackend.EFFICIENT_ATTENTION)):
        try:
            with sdpa_kernel(b):
                F.scaled_dot_product_attention(q, k, v, is_causal=True)
            return name
        except RuntimeError:
            continue
    return "math"


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--batch", type=int, default=64)
    ap.add_argument("--seq-len", type=int, default=1024)
    ap.add_argument("--heads", type=int, default=12)
    ap.add_argument("--head-size", type=int, default=64)
    ap.add_argument("--peak", type=float, default=989e12, help="dense bf16 FLOP/s of the GPU (H100 SXM)")
    a = ap.parse_args()
    B, T, NH, hs = a.batch, a.seq_len, a.heads, a.head_size
    C = NH * hs
    torch.manual_seed(0)
    qkv = (torch.rand(B, T, 3 * C, device="cuda", dtype=torch.bfloat16) * 4 - 2).requires_grad_()
    dout = torch.rand(B, NH, T, hs, device="cuda", dtype=torch.bfloat16) * 2 - 1

    def split():
        q, k, v = qkv.split(C, dim=2)
        return [t.view(B, T, NH, hs).transpose(1, 2) for t in (q, k, v)]

    def forward():
        return F.scaled_dot_product_attention(*split(), is_causal=True)

    def forward_backward():
        qkv.grad = None
        forward().backward(dout)

    fwd = 4.0 * B * NH * T * T * hs / 2
    f_ms = time_ms(forward)
    fb_ms = time_ms(forward_backward)
    b_ms = fb_ms - f_ms
    with torch.no_grad():
        chosen = backend_name(*split())
    print(json.dumps({"impl": "pytorch %s sdpa (%s)" % (torch.__version__, chosen), "device": torch.cuda.get_device_name(),
                      "B": B, "T": T, "NH": NH, "hs": hs,
                      "forward_ms": round(f_ms, 3), "forward_TFLOPs": round(fwd / f_ms * 1e-9, 1),
                      "backward_ms": round(b_ms, 3), "backward_TFLOPs": round(2.5 * fwd / b_ms * 1e-9, 1),
                      "fwd_bwd_ms": round(fb_ms, 3), "fwd_bwd_TFLOPs": round(3.5 * fwd / fb_ms * 1e-9, 1),
                      "fwd_bwd_fraction_of_peak": round(3.5 * fwd / fb_ms * 1e3 / a.peak, 3)}))


if __name__ == "__main__":
    main()
