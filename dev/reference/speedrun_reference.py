#!/usr/bin/python3
"""The NanoGPT speedrun's model and optimizers in PyTorch: the reference for the speedrun recipe's ops and for the
model and trainer that will run them (docs/speedrun.md, docs/reference.md "The speedrun reference").

From a config and a seed this builds the speedrun architecture (the ModernArch / UntieEmbed records, optionally with
the ShortcutsTweaks record's options), draws one batch, and writes into an output directory one tensor file,
speedrun_reference.bin (format in docs/formats.md, "Tensor file"): the config, the batch, the initial parameters, the
logits and loss, every parameter gradient, then `steps` optimizer steps on that batch (Muon for the block matrices,
Adam for the embedding, the head and the scalars, the records' schedule): their losses and the final parameters; and
Newton-Schulz cases computed in float64 (random matrices and the first non-zero Muon update of fcw[0]), for the
C++ tests.

The model, written out op by op (nothing fused):
  x = rmsnorm(wte[idx]); x0 = x                                   (no position embedding)
  per layer: [embed skip: x = l0 x + l1 x0]
             qkv = rmsnorm(x) @ qkvw^T                            (q, k, v of C each; no biases anywhere)
             [value residual: v = (1 - lam) v + lam v1, v1 = block 0's v; block 0 is left as it is]
             q, k = rotary(rmsnorm_per_head(q)), rotary(rmsnorm_per_head(k))
             x = x + causal_attention(q, k, v) @ attprojw^T       (softmax(q k^T / sqrt(hs)), explicit mask)
             x = x + relu(rmsnorm(x) @ fcw^T)^2 @ fcprojw^T
  z = rmsnorm(x) @ lm_head^T   (B, T, Vp; untied head)   [softcap: c = 30 tanh(z / 30)]   loss = CE(c[..., :V])
rmsnorm has no gain and eps 2^-23 (PyTorch's rms_norm default for fp32). Rotary: the first half of a head turns with
its second half, y1 = x1 cos + x2 sin, y2 = -x1 sin + x2 cos, angle t 10000^(-2i/hs), the table computed in float64
and rounded to fp32 as llmc/rotary_table.h does.

Initialisation as the records: wte ~ N(0, 1) (nn.Embedding), block matrices ~ U(+-1/sqrt(fan_in)) (nn.Linear), attprojw,
fcprojw and lm_head zero, lambdas (1, 0), lam 0.5; padded vocabulary rows of wte and lm_head zero. With zero
projections and head every gradient but lm_head's is zero at the start, so --perturb draws the zero matrices like the
others (lm_head's real rows too) and the scalars near their initial values, for a gradient check of everything.

Usage: /usr/bin/python3 dev/reference/speedrun_reference.py --out DIR [--layers 2 --heads 4 --channels 64 --vocab 250
       --batch 2 --seq-len 16 --seed 42 --steps 10 --perturb --record9 | --value-residual --embed-skip --softcap
       --momentum-warmup 500] [--float64] [--bf16-noise]
"""
import argparse
import math
import os
import sys

import numpy as np
import torch

TENSOR_MAGIC, TENSOR_VERSION = 20241103, 1
F32, F64, I32 = 1, 2, 3
RMS_EPS = 2.0 ** -23
NS_A, NS_B, NS_C, NS_STEPS, NS_EPS = 3.4445, -4.7750, 2.0315, 5, 1e-7
SOFTCAP = 30.0
MATRICES = ["qkvw", "attprojw", "fcw", "fcprojw"]  # Muon


def pad_vocab(V):
    return (V + 127) // 128 * 128


def param_names(cfg):
    names = ["wte"] + MATRICES + ["lm_head"]
    if cfg["value_residual"]:
        names.append("vlambda")
    if cfg["embed_skip"]:
        names.append("lambdas")
    return names


def init_params(cfg, seed, perturb):
    L, C, V, Vp = cfg["L"], cfg["C"], cfg["V"], cfg["Vp"]
    g = torch.Generator().manual_seed(seed)

    def uniform(shape, fan_in):
        bound = 1.0 / math.sqrt(fan_in)
        return (torch.rand(shape, generator=g) * 2 - 1) * bound

    p = {"wte": torch.zeros(Vp, C), "lm_head": torch.zeros(Vp, C)}
    p["wte"][:V] = torch.randn(V, C, generator=g)
    p["qkvw"] = uniform((L, 3 * C, C), C)
    p["attprojw"] = uniform((L, C, C), C) if perturb else torch.zeros(L, C, C)
    p["fcw"] = uniform((L, 4 * C, C), C)
    p["fcprojw"] = uniform((L, C, 4 * C), 4 * C) if perturb else torch.zeros(L, C, 4 * C)
    if perturb:
        p["lm_head"][:V] = uniform((V, C), C)
    if cfg["value_residual"]:
        p["vlambda"] = torch.full((L,), 0.5) + (0.1 * torch.randn(L, generator=g) if perturb else 0)
    if cfg["embed_skip"]:
        p["lambdas"] = torch.tensor([[1.0, 0.0]] * L) + (0.1 * torch.randn(L, 2, generator=g) if perturb else 0)
    return {n: p[n].float() for n in param_names(cfg)}


def rmsnorm(x):
    return x * torch.rsqrt((x * x).mean(-1, keepdim=True) + RMS_EPS)


def rotary_table(T, hs):
    """cos, sin (T, hs/2) as llmc/rotary_table.h: float64 angles and functions, rounded once to fp32."""
    i = np.arange(hs // 2, dtype=np.float64)
    angle = np.outer(np.arange(T, dtype=np.float64), 10000.0 ** (-2.0 * i / hs))
    return torch.from_numpy(np.cos(angle).astype(np.float32)), torch.from_numpy(np.sin(angle).astype(np.float32))


def rotary(x, cos, sin):
    """x (B, T, NH, hs): the first half of each head turns with the second half."""
    h = x.shape[-1] // 2
    x1, x2 = x[..., :h], x[..., h:]
    c, s = cos[None, :, None, :].to(x.dtype), sin[None, :, None, :].to(x.dtype)
    return torch.cat([x1 * c + x2 * s, x1 * -s + x2 * c], dim=-1)


def attention(q, k, v):
    """(B, T, NH, hs) each -> (B, T, NH * hs), causal, scale 1/sqrt(hs)."""
    B, T, NH, hs = q.shape
    q, k, v = (t.transpose(1, 2) for t in (q, k, v))
    att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(hs))
    mask = torch.tril(torch.ones(T, T, dtype=torch.bool))
    att = torch.softmax(att.masked_fill(~mask, float("-inf")), dim=-1)
    return (att @ v).transpose(1, 2).reshape(B, T, NH * hs)


class _RoundActivation(torch.autograd.Function):
    """bf16 emulation of a stored activation: rounds the value, and its gradient on the way back (the CUDA backend
    stores activation gradients in bf16 too)."""
    @staticmethod
    def forward(ctx, x):
        return x.to(torch.bfloat16).to(x.dtype)

    @staticmethod
    def backward(ctx, g):
        return g.to(torch.bfloat16).to(g.dtype)


class _RoundParam(torch.autograd.Function):
    """bf16 emulation of a parameter: a bf16 copy of the fp32 master weights; its gradient stays fp32."""
    @staticmethod
    def forward(ctx, x):
        return x.to(torch.bfloat16).to(x.dtype)

    @staticmethod
    def backward(ctx, g):
        return g


def forward(p, cfg, inputs, targets, bf16=False):
    """Returns the raw logits z (B, T, Vp) and the mean cross-entropy over B T positions of (capped) z[..., :V].
    bf16: emulate the CUDA backend's rounding (llmc/speedrun.h's stored buffers): the parameters and every activation
    the model stores are rounded to bf16 (to nearest), and so are the activation gradients; the parameter gradients,
    the soft-cap and the loss stay fp32."""
    L, NH, C, V = cfg["L"], cfg["NH"], cfg["C"], cfg["V"]
    B, T = inputs.shape
    hs = C // NH
    cos, sin = rotary_table(T, hs)
    r = _RoundActivation.apply if bf16 else (lambda t: t)
    if bf16:
        p = {n: _RoundParam.apply(t) for n, t in p.items()}
    x = r(rmsnorm(p["wte"][inputs]))
    x0, v1 = x, None
    for l in range(L):
        if cfg["embed_skip"]:
            x = r(p["lambdas"][l, 0] * x + p["lambdas"][l, 1] * x0)
        qkv = r(r(rmsnorm(x)) @ p["qkvw"][l].t())
        q, k, v = (t.reshape(B, T, NH, hs) for t in qkv.split(C, dim=-1))
        if cfg["value_residual"]:
            if l == 0:
                v1 = v
            else:
                v = r((1 - p["vlambda"][l]) * v + p["vlambda"][l] * v1)
        q, k = r(rotary(rmsnorm(q), cos, sin)), r(rotary(rmsnorm(k), cos, sin))
        x = r(x + r(r(attention(q, k, v)) @ p["attprojw"][l].t()))
        h = r(torch.relu(r(r(rmsnorm(x)) @ p["fcw"][l].t())).square())
        x = r(x + r(h @ p["fcprojw"][l].t()))
    z = r(r(rmsnorm(x)) @ p["lm_head"].t())
    c = SOFTCAP * torch.tanh(z / SOFTCAP) if cfg["softcap"] else z
    loss = torch.nn.functional.cross_entropy(c[..., :V].reshape(-1, V), targets.reshape(-1))
    return z, loss


def newton_schulz(G, bf16=False):
    """The records' iteration, literally: normalise, transpose a tall matrix, five quintic steps, transpose back.
    bf16: as the CUDA backend computes it (llmc/cuda/newton_schulz.cuh): X, A = X X^T, B = c A A + b A and the next
    X = a X + B X each rounded to bf16 (products summed in fp32)."""
    r = (lambda t: t.to(torch.bfloat16).to(t.dtype)) if bf16 else (lambda t: t)
    X = r(G / (G.norm() + NS_EPS))
    tall = G.shape[0] > G.shape[1]
    if tall:
        X = X.t()
    for _ in range(NS_STEPS):
        A = r(X @ X.t())
        if bf16:
            X = r(NS_A * X + r(NS_C * A @ A + NS_B * A) @ X)
        else:
            Bm = A @ X
            X = NS_A * X + NS_B * Bm + NS_C * A @ Bm
    return X.t() if tall else X


def muon_blocks(name, t, C):
    """The matrices Muon orthogonalises in a stacked tensor: one per layer, and qkvw's q, k, v separately."""
    for l in range(t.shape[0]):
        if name == "qkvw":
            for part in range(3):
                yield t[l, part * C:(part + 1) * C]
        else:
            yield t[l]


def lr_factor(step, steps, warmdown):
    """The records' schedule: 1, then linear to 0 over the last `warmdown` steps (step is 0-based)."""
    return 1.0 if step < steps - warmdown else (steps - step) / warmdown


def muon_momentum(step, warmup):
    if warmup <= 0:
        return 0.95
    frac = min(step / warmup, 1.0)
    return (1 - frac) * 0.85 + frac * 0.95


def train(p, cfg, opt, inputs, targets, bf16=False):
    """`steps` steps on the same batch; returns the step losses, the lr factors, the momenta and the Newton-Schulz
    input of the first non-zero Muon update of fcw[0] (the Nesterov update, in the run's dtype; with the records'
    zero head every block gradient is zero at the first step)."""
    muon_bufs = {n: torch.zeros_like(p[n]) for n in MATRICES}
    groups = [("wte", opt["embed_lr"]), ("lm_head", opt["head_lr"])] + [
        (n, opt["scalar_lr"]) for n in ("vlambda", "lambdas") if n in p]
    adams = [torch.optim.Adam([p[n]], lr=lr, betas=(0.9, 0.95), eps=1e-8) for n, lr in groups]
    losses, factors, momenta, ns_case = [], [], [], None
    C = cfg["C"]
    for step in range(opt["steps"]):
        for n in p:
            p[n].grad = None
        _, loss = forward(p, cfg, inputs, targets, bf16)
        loss.backward()
        f = lr_factor(step, opt["steps"], opt["warmdown"])
        mu = muon_momentum(step, opt["momentum_warmup"])
        with torch.no_grad():
            for n in MATRICES:
                buf = muon_bufs[n]
                buf.mul_(mu).add_(p[n].grad)
                u = p[n].grad + mu * buf
                for w, g in zip(muon_blocks(n, p[n], C), muon_blocks(n, u, C)):
                    if ns_case is None and n == "fcw" and g.abs().max() > 0:
                        ns_case = g.detach().clone()
                    scale = max(1.0, g.shape[0] / g.shape[1]) ** 0.5
                    w.sub_(opt["muon_lr"] * f * scale * newton_schulz(g, bf16))
        for a, (_, lr) in zip(adams, groups):
            a.param_groups[0]["lr"] = lr * f
            a.step()
        losses.append(loss.item())
        factors.append(f)
        momenta.append(mu)
    return losses, factors, momenta, ns_case


def run(p0, cfg, opt, inputs, targets, dtype, bf16=False):
    """bf16: see forward() and newton_schulz(); the optimizers keep fp32 master weights, as the CUDA backend does."""
    p = {n: t.to(dtype).clone().requires_grad_(True) for n, t in p0.items()}
    z, loss = forward(p, cfg, inputs, targets, bf16)
    loss.backward()
    out = {"logits": z.detach(), "loss": loss.detach().reshape(1)}
    out.update({"grad." + n: p[n].grad.detach().clone() for n in p})
    losses, factors, momenta, ns_case = train(p, cfg, opt, inputs, targets, bf16)
    out["step_losses"] = torch.tensor(losses, dtype=torch.float64)
    out["lr_factors"] = torch.tensor(factors, dtype=torch.float64)
    out["muon_momenta"] = torch.tensor(momenta, dtype=torch.float64)
    out.update({"final." + n: p[n].detach() for n in p})
    out["ns_case"] = ns_case
    return out


def write_tensors(path, tensors):
    """tensors: list of (name, numpy array of float32 / float64 / int32)."""
    header = np.zeros(256, dtype="<i4")
    header[:3] = [TENSOR_MAGIC, TENSOR_VERSION, len(tensors)]
    codes = {np.dtype("float32"): F32, np.dtype("float64"): F64, np.dtype("int32"): I32}
    with open(path, "wb") as f:
        f.write(header.tobytes())
        for name, a in tensors:
            if len(name) > 63 or a.ndim > 4 or a.dtype not in codes:
                sys.exit(f"error: cannot write tensor {name} ({a.dtype}, {a.ndim} dims)")
            meta = np.zeros(6, dtype="<i4")
            meta[0], meta[1] = codes[a.dtype], a.ndim
            meta[2:2 + a.ndim] = a.shape
            f.write(name.encode().ljust(64, b"\0"))
            f.write(meta.tobytes())
            f.write(np.ascontiguousarray(a).astype(a.dtype.newbyteorder("<")).tobytes())


def ns_cases(seed, fc_case):
    """Newton-Schulz inputs (fp32) with their float64 results: wide, tall, square random matrices and fcw[0]'s first
    non-zero update (a tall 4C x C matrix)."""
    g = torch.Generator().manual_seed(seed + 2)
    inputs = [torch.randn(24, 40, generator=g), torch.randn(40, 24, generator=g), torch.randn(32, 32, generator=g),
              fc_case.float()]
    out = []
    for k, G in enumerate(inputs):
        out.append((f"ns_input_{k}", G.numpy().astype(np.float32)))
        out.append((f"ns_output_{k}", newton_schulz(G.double()).numpy()))
    return out


def report_float64(r32, r64, names):
    def rel(a, b):
        a, b = a.double(), b.double()
        return ((a - b).abs().max() / b.abs().max().clamp_min(1e-300)).item()
    print("float32 vs float64 (fp32 rounding noise), max |d| / max |float64| per tensor:")
    print(f"  logits {rel(r32['logits'], r64['logits']):.3g}   loss {rel(r32['loss'], r64['loss']):.3g}")
    print("  grads  " + "  ".join(f"{n} {rel(r32['grad.' + n], r64['grad.' + n]):.3g}" for n in names))
    print(f"  step losses {rel(r32['step_losses'], r64['step_losses']):.3g}")
    print("  final  " + "  ".join(f"{n} {rel(r32['final.' + n], r64['final.' + n]):.3g}" for n in names))


def report_bf16(rb, r32, cfg, opt, names):
    """The bf16 emulation against the fp32 run, in the units of test/fixtures/speedrun_model_check.h's bf16
    tolerances: s = 2^-8 sqrt(10 L + 5) for the logits (of the largest), sqrt(2) s for the gradients (of each tensor's
    largest; the embedding skip's two columns apart, as the model's skip_x and skip_x0), s / 8 for the step losses
    (relative); the parameters after the steps beyond 2u |fp32| in steps (one step: the largest change of one element
    in one step, lr for Adam, 1.25 lr sqrt(max(1, rows / cols)) for Muon), the largest and how many beyond 2."""
    s = 2.0 ** -8 * math.sqrt(10 * cfg["L"] + 5)

    def rel(a, b):
        a, b = a.double(), b.double()
        return ((a - b).abs().max() / b.abs().max().clamp_min(1e-300)).item()

    grads = []
    for n in names:
        a, b = rb["grad." + n], r32["grad." + n]
        if n == "lambdas":
            grads += [("skip_x", rel(a[:, 0], b[:, 0])), ("skip_x0", rel(a[:, 1], b[:, 1]))]
        else:
            grads.append((n, rel(a, b)))
    lr = {"wte": opt["embed_lr"], "lm_head": opt["head_lr"], "vlambda": opt["scalar_lr"], "lambdas": opt["scalar_lr"]}
    for n in MATRICES:
        rows, cols = next(muon_blocks(n, r32["final." + n], cfg["C"])).shape
        lr[n] = 1.25 * opt["muon_lr"] * math.sqrt(max(1.0, rows / cols))
    print(f"bf16 emulation vs float32, in units of the bf16 tolerances (s = {s:.4g}):")
    print(f"  logits {rel(rb['logits'], r32['logits']) / s:.3g} s")
    print("  grads  " + "  ".join(f"{n} {e / (math.sqrt(2) * s):.3g}" for n, e in grads) + "  (sqrt(2) s)")
    steps = ((rb["step_losses"] - r32["step_losses"]).abs() / r32["step_losses"].abs()).max().item()
    print(f"  step losses {steps / (s / 8):.3g} (s / 8)")
    final = []
    for n in names:
        want = r32["final." + n].double()
        d = (rb["final." + n].to(torch.bfloat16).double() - want).abs() - 2.0 ** -7 * want.abs()
        final.append(f"{n} {d.max().item() / lr[n]:.3g} ({int((d > 2 * lr[n]).sum())} of {d.numel()})")
    print("  final  " + "  ".join(final) + "  (steps: the largest; in parentheses, elements beyond 2)")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", required=True, help="output directory (created)")
    ap.add_argument("--layers", type=int, default=2)
    ap.add_argument("--heads", type=int, default=4)
    ap.add_argument("--channels", type=int, default=64)
    ap.add_argument("--vocab", type=int, default=250)
    ap.add_argument("--batch", type=int, default=2)
    ap.add_argument("--seq-len", type=int, default=16)
    ap.add_argument("--seed", type=int, default=42)
    ap.add_argument("--steps", type=int, default=10)
    ap.add_argument("--warmdown", type=int, default=None,
                    help="steps of the linear warm-down to 0 (default: 28.56%% of the steps, as the records)")
    ap.add_argument("--perturb", action="store_true", help="no zero-initialised matrices (see the top)")
    ap.add_argument("--value-residual", action="store_true")
    ap.add_argument("--embed-skip", action="store_true")
    ap.add_argument("--softcap", action="store_true")
    ap.add_argument("--momentum-warmup", type=int, default=0, help="Muon momentum 0.85 -> 0.95 over N steps")
    ap.add_argument("--record9", action="store_true",
                    help="the ShortcutsTweaks record's options: value residual, embed skip, soft-cap, warm-up 500")
    ap.add_argument("--float64", action="store_true", help="also run in float64 and print the fp32 noise level")
    ap.add_argument("--bf16-noise", action="store_true",
                    help="also run with the CUDA backend's bf16 rounding emulated and print its distance from fp32")
    a = ap.parse_args()

    if a.channels % a.heads or (a.channels // a.heads) % 2:
        sys.exit(f"error: channels {a.channels} must split into {a.heads} heads of an even size")
    if a.record9:
        a.value_residual = a.embed_skip = a.softcap = True
        a.momentum_warmup = a.momentum_warmup or 500
    torch.set_num_threads(1)
    cfg = {"L": a.layers, "NH": a.heads, "C": a.channels, "V": a.vocab, "Vp": pad_vocab(a.vocab),
           "value_residual": a.value_residual, "embed_skip": a.embed_skip, "softcap": a.softcap}
    warmdown = a.warmdown if a.warmdown is not None else max(1, round(0.2856 * a.steps))
    opt = {"steps": a.steps, "warmdown": warmdown, "momentum_warmup": a.momentum_warmup, "muon_lr": 0.02,
           "embed_lr": 0.3, "head_lr": 0.002, "scalar_lr": 0.02}
    p0 = init_params(cfg, a.seed, a.perturb)
    g = torch.Generator().manual_seed(a.seed + 1)
    inputs = torch.randint(0, a.vocab, (a.batch, a.seq_len), generator=g)
    targets = torch.randint(0, a.vocab, (a.batch, a.seq_len), generator=g)
    names = param_names(cfg)

    r = run(p0, cfg, opt, inputs, targets, torch.float32)
    config = [a.layers, a.heads, a.channels, a.vocab, cfg["Vp"], a.seq_len, a.batch, a.seed, a.steps, warmdown,
              a.momentum_warmup, int(a.value_residual), int(a.embed_skip), int(a.softcap), int(a.perturb)]
    hparams = [opt["muon_lr"], opt["embed_lr"], opt["head_lr"], opt["scalar_lr"], 0.9, 0.95, 1e-8, 0.95, NS_EPS,
               RMS_EPS, SOFTCAP, 10000.0]
    tensors = [("config", np.array(config, dtype=np.int32)), ("hparams", np.array(hparams, dtype=np.float32)),
               ("inputs", inputs.numpy().astype(np.int32)), ("targets", targets.numpy().astype(np.int32))]
    tensors += [("param." + n, p0[n].numpy()) for n in names]
    tensors += [(k, r[k].numpy().astype(np.float32)) for k in ("logits", "loss")]
    tensors += [("grad." + n, r["grad." + n].numpy()) for n in names]
    tensors += [(k, r[k].numpy().astype(np.float32)) for k in ("step_losses", "lr_factors", "muon_momenta")]
    tensors += [("final." + n, r["final." + n].numpy()) for n in names]
    tensors += ns_cases(a.seed, r["ns_case"])
    os.makedirs(a.out, exist_ok=True)
    write_tensors(os.path.join(a.out, "speedrun_reference.bin"), tensors)
    print(f"{a.out}: L={a.layers} NH={a.heads} C={a.channels} V={a.vocab} Vp={cfg['Vp']} B={a.batch} T={a.seq_len} "
          f"options: value residual {int(a.value_residual)}, embed skip {int(a.embed_skip)}, softcap "
          f"{int(a.softcap)}, momentum warm-up {a.momentum_warmup}; loss={r['loss'].item():.6f} "
          f"steps {r['step_losses'][0].item():.4f}..{r['step_losses'][-1].item():.4f}")
    if a.float64:
        report_float64(r, run(p0, cfg, opt, inputs, targets, torch.float64), names)
    if a.bf16_noise:
        report_bf16(run(p0, cfg, opt, inputs, targets, torch.float32, bf16=True), r, cfg, opt, names)


if __name__ == "__main__":
    main()
