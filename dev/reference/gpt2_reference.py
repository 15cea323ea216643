#!/usr/bin/python3
"""GPT-2 in PyTorch: the reference test_gpt2 / test_gpt2_cpu are checked against.

From a config (L, NH, C, maxT, V) and a seed this builds a GPT-2, draws one batch (B, T) of inputs and targets,
and writes into an output directory:
  model.bin      the initial weights as an llm.c model file (version 3, fp32; padded wte rows are zero)
  reference.bin  the batch, the logits, the loss, all 16 gradients, then 10 AdamW steps on that batch (their
                 losses, gradient norms and the parameters after the last step); format in docs/reference.md
and with --llmc-debug-state FILE the same batch, logits, loss and gradients in llm.c's debug-state layout (its
test_gpt2.c's input; docs/formats.md), which ./test_gpt2_cpu reads too.

The model mirrors llmc/model.h op by op, written out by hand so nothing depends on fused PyTorch kernels:
  causal attention as softmax(q k^T / sqrt(hs)) v with an explicit mask (no scaled_dot_product_attention);
  GELU with the tanh approximation; layernorm eps 1e-5 (biased variance); weight tying (lm_head = wte);
  the vocabulary padded to Vp with zero rows: logits have Vp columns, the loss uses the first V only.
Parameters are kept as the 16 tensors of llmc/layout.h, stacked over layers, so gradients come out in layout order.

It runs in float32 like the CPU backend. --float64 also reruns everything in float64 from the same fp32 weights and
prints how far the fp32 run is from it: that is the size of fp32 rounding noise for this shape, which the
tolerances in test_gpt2.cu are set against.

Usage: /usr/bin/python3 dev/reference/gpt2_reference.py --out DIR [--layers 2 --heads 4 --channels 64 --max-seq-len 32
       --vocab 250 --batch 2 --seq-len 16 --seed 42 --perturb --float64]
"""
import argparse
import math
import os
import struct
import sys

import numpy as np
import torch

MODEL_MAGIC, MODEL_VERSION_FP32 = 20240326, 3
REF_MAGIC, REF_VERSION = 20240622, 1
LLMC_STATE_MAGIC, LLMC_STATE_VERSION = 20240327, 2  # llm.c's debug state (its test_gpt2.c reads version 2)

# The 16 tensors in llm.c order (llmc/layout.h). Decayed: the 2-D matrices (wte, wpe, qkvw, attprojw, fcw, fcprojw).
NAMES = ["wte", "wpe", "ln1w", "ln1b", "qkvw", "qkvb", "attprojw", "attprojb",
         "ln2w", "ln2b", "fcw", "fcb", "fcprojw", "fcprojb", "lnfw", "lnfb"]
DECAYED = {"wte", "wpe", "qkvw", "attprojw", "fcw", "fcprojw"}


def shapes(L, C, maxT, Vp):
    return {"wte": (Vp, C), "wpe": (maxT, C), "ln1w": (L, C), "ln1b": (L, C),
            "qkvw": (L, 3 * C, C), "qkvb": (L, 3 * C), "attprojw": (L, C, C), "attprojb": (L, C),
            "ln2w": (L, C), "ln2b": (L, C), "fcw": (L, 4 * C, C), "fcb": (L, 4 * C),
            "fcprojw": (L, C, 4 * C), "fcprojb": (L, C), "lnfw": (C,), "lnfb": (C,)}


def pad_vocab(V):
    return (V + 127) // 128 * 128


def init_params(cfg, seed, perturb):
    """GPT-2 init: weights N(0, 0.02), residual projections N(0, 0.02/sqrt(2L)), biases 0, layernorm weights 1,
    padded wte rows 0. With perturb, biases ~ N(0, 0.02) and layernorm weights ~ 1 + N(0, 0.1) (padded rows stay
    zero), so that a backend that mixes up a bias or a layernorm weight cannot pass by multiplying by 1 or adding 0."""
    L, C, V, Vp = cfg["L"], cfg["C"], cfg["V"], cfg["Vp"]
    g = torch.Generator().manual_seed(seed)
    p = {n: torch.zeros(s, dtype=torch.float32) for n, s in shapes(L, C, cfg["maxT"], Vp).items()}
    resid_std = 0.02 / math.sqrt(2 * L)
    for n in NAMES:
        if n in DECAYED:
            std = resid_std if n in ("attprojw", "fcprojw") else 0.02
            t = p[n][:V] if n == "wte" else p[n]
            t.normal_(0.0, std, generator=g)
        elif n in ("ln1w", "ln2w", "lnfw"):
            p[n].fill_(1.0)
            if perturb:
                p[n].add_(torch.randn(p[n].shape, generator=g) * 0.1)
        elif perturb:  # biases
            p[n].normal_(0.0, 0.02, generator=g)
    return p


def layernorm(x, w, b):
    mean = x.mean(-1, keepdim=True)
    var = ((x - mean) ** 2).mean(-1, keepdim=True)  # biased
    return (x - mean) / torch.sqrt(var + 1e-5) * w + b


def gelu_tanh(x):
    return 0.5 * x * (1.0 + torch.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * x ** 3)))


def attention(qkv, NH):
    """qkv (B,T,3C): q, k, v each C wide, heads contiguous inside each. Returns (B,T,C), heads concatenated."""
    B, T, C3 = qkv.shape
    C = C3 // 3
    hs = C // NH
    q, k, v = qkv.split(C, dim=-1)
    q, k, v = (x.view(B, T, NH, hs).transpose(1, 2) for x in (q, k, v))  # (B,NH,T,hs)
    att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(hs))
    mask = torch.tril(torch.ones(T, T, dtype=torch.bool))
    att = att.masked_fill(~mask, float("-inf"))
    att = torch.softmax(att, dim=-1)
    return (att @ v).transpose(1, 2).reshape(B, T, C)


class _RoundActivation(torch.autograd.Function):
    """bf16 emulation of a stored activation: rounds the value, and its gradient on the way back (the CUDA
    backend stores activation gradients in bf16 too)."""
    @staticmethod
    def forward(ctx, x):
        return x.to(torch.bfloat16).to(x.dtype)

    @staticmethod
    def backward(ctx, g):
        return g.to(torch.bfloat16).to(g.dtype)


class _RoundParam(torch.autograd.Function):
    """bf16 emulation of a parameter: bf16 copy of the fp32 master weights; its gradient stays fp32."""
    @staticmethod
    def forward(ctx, x):
        return x.to(torch.bfloat16).to(x.dtype)

    @staticmethod
    def backward(ctx, g):
        return g


def forward(p, cfg, inputs, targets, bf16=False):
    """Returns logits (B,T,Vp) and the mean cross-entropy over B*T positions of logits[..., :V].
    bf16: emulate the CUDA backend's rounding: parameters and every activation the model stores are rounded to
    bf16 (round to nearest), and so are activation gradients; parameter gradients and the loss stay fp32."""
    L, NH, V = cfg["L"], cfg["NH"], cfg["V"]
    B, T = inputs.shape
    r = _RoundActivation.apply if bf16 else (lambda t: t)
    if bf16:
        p = {n: _RoundParam.apply(t) for n, t in p.items()}
    x = r(p["wte"][inputs] + p["wpe"][:T])
    for l in range(L):
        h = r(layernorm(x, p["ln1w"][l], p["ln1b"][l]))
        qkv = r(h @ p["qkvw"][l].t() + p["qkvb"][l])
        y = r(attention(qkv, NH))
        x = r(x + r(y @ p["attprojw"][l].t() + p["attprojb"][l]))
        h = r(layernorm(x, p["ln2w"][l], p["ln2b"][l]))
        h = r(gelu_tanh(r(h @ p["fcw"][l].t() + p["fcb"][l])))
        x = r(x + r(h @ p["fcprojw"][l].t() + p["fcprojb"][l]))
    x = r(layernorm(x, p["lnfw"], p["lnfb"]))
    logits = r(x @ p["wte"].t())  # weight tying; padded rows of wte give zero-weight columns
    loss = torch.nn.functional.cross_entropy(logits[..., :V].reshape(-1, V), targets.reshape(-1))
    return logits, loss


def clip_by_global_norm(params, clip):
    """The global L2 norm of the gradients before clipping, then each gradient scaled by min(1, clip / (norm + 1e-6))
    (torch.nn.utils.clip_grad_norm_'s rule). The norm is summed in float64 from the gradients' values: a float32 sum
    of 124M squares (clip_grad_norm_'s) is off by up to 2.45e-4 relative, more than the code under test (within
    2.4e-6 of float64 at that size), so the reference must not be the less exact of the two."""
    norm = math.sqrt(sum(float((q.grad.double() ** 2).sum()) for q in params))
    coef = min(1.0, clip / (norm + 1e-6))
    for q in params:
        q.grad.mul_(coef)
    return norm


def run(p0, cfg, inputs, targets, dtype, opt, bf16=False):
    """Forward + backward at p0, then `steps` AdamW steps on the same batch. Returns a dict of float64 numpy arrays.
    bf16: see forward(); the optimizer keeps fp32 master weights, as the CUDA backend does."""
    p = {n: t.to(dtype).clone().requires_grad_(True) for n, t in p0.items()}
    logits, loss = forward(p, cfg, inputs, targets, bf16)
    loss.backward()
    out = {"logits": logits.detach(), "loss": loss.detach().reshape(1),
           "grads": torch.cat([p[n].grad.reshape(-1) for n in NAMES])}
    for n in NAMES:
        p[n].grad = None
    groups = [{"params": [p[n] for n in NAMES if n in DECAYED], "weight_decay": opt["weight_decay"]},
              {"params": [p[n] for n in NAMES if n not in DECAYED], "weight_decay": 0.0}]
    adamw = torch.optim.AdamW(groups, lr=opt["lr"], betas=(opt["beta1"], opt["beta2"]), eps=opt["eps"])
    losses, norms = [], []
    for _ in range(opt["steps"]):
        adamw.zero_grad(set_to_none=True)
        _, loss = forward(p, cfg, inputs, targets, bf16)
        loss.backward()
        norm = clip_by_global_norm([p[n] for n in NAMES], opt["grad_clip"])
        adamw.step()
        losses.append(loss.item())
        norms.append(norm)
    out["step_losses"] = torch.tensor(losses, dtype=torch.float64)
    out["grad_norms"] = torch.tensor(norms, dtype=torch.float64)
    out["final_params"] = torch.cat([p[n].detach().reshape(-1) for n in NAMES])
    return {k: v.to(torch.float64).numpy() for k, v in out.items()}


def write_model(path, cfg, p):
    header = np.zeros(256, dtype="<i4")
    header[:8] = [MODEL_MAGIC, MODEL_VERSION_FP32, cfg["maxT"], cfg["V"], cfg["L"], cfg["NH"], cfg["C"], cfg["Vp"]]
    with open(path, "wb") as f:
        f.write(header.tobytes())
        for n in NAMES:
            f.write(p[n].numpy().astype("<f4").tobytes())


def write_reference(path, cfg, B, T, seed, opt, inputs, targets, r, num_params):
    """Layout documented in docs/reference.md."""
    header = np.zeros(256, dtype="<i4")
    header[:13] = [REF_MAGIC, REF_VERSION, B, T, cfg["maxT"], cfg["V"], cfg["L"], cfg["NH"], cfg["C"], cfg["Vp"],
                   opt["steps"], num_params, seed]
    # Optimizer hyperparameters as float32 bit patterns in slots 16..21.
    floats = np.array([opt["lr"], opt["beta1"], opt["beta2"], opt["eps"], opt["weight_decay"], opt["grad_clip"]],
                      dtype="<f4")
    header[16:22] = floats.view("<i4")
    with open(path, "wb") as f:
        f.write(header.tobytes())
        f.write(inputs.numpy().astype("<i4").tobytes())
        f.write(targets.numpy().astype("<i4").tobytes())
        for k in ("logits", "loss", "grads", "step_losses", "grad_norms", "final_params"):
            f.write(r[k].astype("<f4").tobytes())


def write_llmc_debug_state(path, cfg, inputs, targets, r):
    """The same batch, logits, loss and gradients in llm.c's debug-state layout (what its train_gpt2.py writes for its
    test_gpt2.c; docs/formats.md): 256 int32 header ([0] magic 20240327, [1] version 2, [2] B, [3] T), inputs and
    targets (B*T int32 each), logits (B, T, V) float32 (the V real columns only), the loss, then every gradient in
    the model file's order and shapes (wte with its Vp padded rows, which are zero)."""
    header = np.zeros(256, dtype="<i4")
    header[:4] = [LLMC_STATE_MAGIC, LLMC_STATE_VERSION, inputs.shape[0], inputs.shape[1]]
    with open(path, "wb") as f:
        f.write(header.tobytes())
        f.write(inputs.numpy().astype("<i4").tobytes())
        f.write(targets.numpy().astype("<i4").tobytes())
        f.write(r["logits"][..., :cfg["V"]].astype("<f4").tobytes())
        for k in ("loss", "grads"):
            f.write(r[k].astype("<f4").tobytes())


def report_noise(title, r, base, cfg, opt):
    """How far run r is from run base, in the units test_gpt2.cu's tolerances use."""
    def rel_to_max(a, b):
        return np.abs(a - b).max() / np.abs(b).max()
    print(f"{title}:")
    print(f"  logits        max|d| / max|logit|          {rel_to_max(r['logits'], base['logits']):.3g}")
    print(f"  loss          relative                     {abs(r['loss'][0] - base['loss'][0]) / base['loss'][0]:.3g}")
    sh = shapes(cfg["L"], cfg["C"], cfg["maxT"], cfg["Vp"])
    worst, off = ("", 0.0), 0
    for n in NAMES:
        k = int(np.prod(sh[n]))
        e = rel_to_max(r["grads"][off:off + k], base["grads"][off:off + k])
        worst = max(worst, (n, e), key=lambda x: x[1])
        off += k
    print(f"  grads         max|d| / max|grad| of tensor {worst[1]:.3g} ({worst[0]})")
    for k in ("step_losses", "grad_norms"):
        print(f"  {k:13s} max relative                 {(np.abs(r[k] - base[k]) / np.abs(base[k])).max():.3g}")
    d = np.abs(r["final_params"] - base["final_params"])
    lr_steps = opt["lr"] * opt["steps"]
    tight = (d > 1e-5 * np.abs(base["final_params"]) + 1e-3 * opt["lr"]).mean()
    print(f"  final_params  max|d| / (lr*steps)          {d.max() / lr_steps:.3g}; "
          f"fraction beyond 1e-5 rel + 1e-3 lr: {tight:.3g}")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", required=True, help="output directory (created)")
    ap.add_argument("--layers", type=int, default=2)
    ap.add_argument("--heads", type=int, default=4)
    ap.add_argument("--channels", type=int, default=64)
    ap.add_argument("--max-seq-len", type=int, default=32)
    ap.add_argument("--vocab", type=int, default=250)
    ap.add_argument("--batch", type=int, default=2)
    ap.add_argument("--seq-len", type=int, default=16)
    ap.add_argument("--seed", type=int, default=42)
    ap.add_argument("--perturb", action="store_true", help="random biases and layernorm weights (see init_params)")
    ap.add_argument("--steps", type=int, default=10)
    ap.add_argument("--lr", type=float, default=1e-3)
    ap.add_argument("--weight-decay", type=float, default=0.1)
    ap.add_argument("--grad-clip", type=float, default=1.0)
    ap.add_argument("--float64", action="store_true", help="also run in float64 and print the fp32 noise level")
    ap.add_argument("--bf16-noise", action="store_true",
                    help="also run with bf16 rounding emulated and print its distance from the fp32 run")
    ap.add_argument("--llmc-debug-state", metavar="FILE",
                    help="also write the batch, logits, loss and gradients as llm.c's debug state (its layout)")
    a = ap.parse_args()

    if a.channels % a.heads:
        sys.exit(f"error: channels {a.channels} not divisible by heads {a.heads}")
    if a.seq_len > a.max_seq_len:
        sys.exit(f"error: seq-len {a.seq_len} exceeds max-seq-len {a.max_seq_len}")
    torch.set_num_threads(1)  # deterministic and fast enough at these sizes
    cfg = {"L": a.layers, "NH": a.heads, "C": a.channels, "maxT": a.max_seq_len, "V": a.vocab,
           "Vp": pad_vocab(a.vocab)}
    opt = {"lr": a.lr, "beta1": 0.9, "beta2": 0.95, "eps": 1e-8, "weight_decay": a.weight_decay,
           "grad_clip": a.grad_clip, "steps": a.steps}
    p0 = init_params(cfg, a.seed, a.perturb)
    g = torch.Generator().manual_seed(a.seed + 1)
    inputs = torch.randint(0, a.vocab, (a.batch, a.seq_len), generator=g)
    targets = torch.randint(0, a.vocab, (a.batch, a.seq_len), generator=g)
    num_params = sum(t.numel() for t in p0.values())

    r32 = run(p0, cfg, inputs, targets, torch.float32, opt)
    os.makedirs(a.out, exist_ok=True)
    write_model(os.path.join(a.out, "model.bin"), cfg, p0)
    write_reference(os.path.join(a.out, "reference.bin"), cfg, a.batch, a.seq_len, a.seed, opt, inputs, targets,
                    r32, num_params)
    if a.llmc_debug_state:
        write_llmc_debug_state(a.llmc_debug_state, cfg, inputs, targets, r32)
    print(f"{a.out}: L={a.layers} NH={a.heads} C={a.channels} maxT={a.max_seq_len} V={a.vocab} Vp={cfg['Vp']} "
          f"B={a.batch} T={a.seq_len} params={num_params} loss={r32['loss'][0]:.6f} "
          f"losses {r32['step_losses'][0]:.4f}..{r32['step_losses'][-1]:.4f} "
          f"norms {r32['grad_norms'].min():.3f}..{r32['grad_norms'].max():.3f}")
    if a.float64:
        report_noise("float32 vs float64 (fp32 rounding noise)", r32, run(p0, cfg, inputs, targets, torch.float64, opt),
                     cfg, opt)
    if a.bf16_noise:
        rb = run(p0, cfg, inputs, targets, torch.float32, opt, bf16=True)
        rb["final_params"] = torch.from_numpy(rb["final_params"]).to(torch.bfloat16).double().numpy()
        report_noise("bf16 emulation vs float32", rb, r32, cfg, opt)


if __name__ == "__main__":
    main()
