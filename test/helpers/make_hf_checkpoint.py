#!/usr/bin/env python3
"""Writes a Hugging Face GPT-2 checkpoint from PyTorch, as the hub's files are laid out, for test/e2e/import_hf_test.sh.

usage: make_hf_checkpoint.py REF_DIR OUT_DIR [--prefix transformer.] [--dtype F32|F16|BF16] [--extras]

REF_DIR is a dev/reference/gpt2_reference.py output (model.bin in llm.c's layout: 16 stacked tensors, weights
(out, in)). The parameters become torch tensors under HF's names and shapes: Conv1D weights (in, out), so each
matrix is transposed; wte without the padded rows. --extras adds what the hub's gpt2 file also carries: the causal
mask buffers h.N.attn.bias / masked_bias and an lm_head.weight equal to wte. Written with safetensors' layout by hand
(Debian has no python3-safetensors package): u64 header length, JSON header, raw little-endian data.

Before writing, the HF-layout state dict is run through HF's GPT-2 forward (test/helpers/export_hf_check.py: x @ W + b with
W stored (in, out)) and compared with the reference model's own forward (dev/reference), so the file is a faithful
HF GPT-2 of the reference model, not merely our layout under other names.
"""
import argparse
import json
import os
import struct
import sys

import numpy as np
import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "dev", "reference"))
sys.path.insert(0, HERE)
import gpt2_reference as ref  # noqa: E402
from export_hf_check import hf_gpt2_logits  # noqa: E402


def read_llmc_model(path):
    raw = open(path, "rb").read()
    h = np.frombuffer(raw[:1024], dtype="<i4")
    assert h[0] == ref.MODEL_MAGIC and h[1] == ref.MODEL_VERSION_FP32, h[:2]
    cfg = {"maxT": int(h[2]), "V": int(h[3]), "L": int(h[4]), "NH": int(h[5]), "C": int(h[6]), "Vp": int(h[7])}
    p, off = {}, 1024
    for n, shape in ref.shapes(cfg["L"], cfg["C"], cfg["maxT"], cfg["Vp"]).items():
        count = int(np.prod(shape))
        p[n] = torch.from_numpy(np.frombuffer(raw[off:off + 4 * count], dtype="<f4").reshape(shape).copy())
        off += 4 * count
    assert off == len(raw)
    return cfg, p


def hf_state_dict(cfg, p):
    sd = {"wte.weight": p["wte"][:cfg["V"]], "wpe.weight": p["wpe"],
          "ln_f.weight": p["lnfw"], "ln_f.bias": p["lnfb"]}
    for l in range(cfg["L"]):
        h = "h.%d." % l
        sd[h + "ln_1.weight"], sd[h + "ln_1.bias"] = p["ln1w"][l], p["ln1b"][l]
        sd[h + "attn.c_attn.weight"], sd[h + "attn.c_attn.bias"] = p["qkvw"][l].t(), p["qkvb"][l]
        sd[h + "attn.c_proj.weight"], sd[h + "attn.c_proj.bias"] = p["attprojw"][l].t(), p["attprojb"][l]
        sd[h + "ln_2.weight"], sd[h + "ln_2.bias"] = p["ln2w"][l], p["ln2b"][l]
        sd[h + "mlp.c_fc.weight"], sd[h + "mlp.c_fc.bias"] = p["fcw"][l].t(), p["fcb"][l]
        sd[h + "mlp.c_proj.weight"], sd[h + "mlp.c_proj.bias"] = p["fcprojw"][l].t(), p["fcprojb"][l]
    return {k: v.contiguous() for k, v in sd.items()}


TORCH_DTYPES = {"F32": torch.float32, "F16": torch.float16, "BF16": torch.bfloat16, "F64": torch.float64}


def save_safetensors(path, tensors):
    header, blobs, offset = {"__metadata__": {"format": "pt"}}, [], 0
    for name, t in tensors.items():
        dtype = {v: k for k, v in TORCH_DTYPES.items()}.get(t.dtype, "U8" if t.dtype == torch.uint8 else None)
        data = t.contiguous().view(torch.uint8).numpy().tobytes() if t.dtype == torch.bfloat16 else t.numpy().tobytes()
        header[name] = {"dtype": dtype, "shape": list(t.shape), "data_offsets": [offset, offset + len(data)]}
        blobs.append(data)
        offset += len(data)
    text = json.dumps(header).encode()
    text += b" " * (-len(text) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)) + text)
        for b in blobs:
            f.write(b)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("ref_dir")
    ap.add_argument("out_dir")
    ap.add_argument("--prefix", default="")
    ap.add_argument("--dtype", default="F32", choices=["F32", "F16", "BF16"])
    ap.add_argument("--extras", action="store_true")
    # Broken checkpoints, for the importer's refusals: a tensor left out, one stored as float64, one stored in our
    # (out, in) layout instead of HF's (in, out), a config field this model cannot express, an untied lm_head.
    ap.add_argument("--drop")
    ap.add_argument("--as-f64")
    ap.add_argument("--untransposed")
    ap.add_argument("--config-set", help="KEY=JSON_VALUE")
    ap.add_argument("--untied-head", action="store_true")
    a = ap.parse_args()
    cfg, p = read_llmc_model(os.path.join(a.ref_dir, "model.bin"))
    sd = hf_state_dict(cfg, p)
    hf_cfg = {"architectures": ["GPT2LMHeadModel"], "model_type": "gpt2", "vocab_size": cfg["V"],
              "n_positions": cfg["maxT"], "n_ctx": cfg["maxT"], "n_embd": cfg["C"], "n_layer": cfg["L"],
              "n_head": cfg["NH"], "n_inner": None, "activation_function": "gelu_new", "layer_norm_epsilon": 1e-5,
              "tie_word_embeddings": True}
    g = torch.Generator().manual_seed(5)
    idx = torch.randint(0, cfg["V"], (2, min(16, cfg["maxT"])), generator=g)
    with torch.no_grad():
        theirs = hf_gpt2_logits({"transformer." + k: v for k, v in sd.items()}, hf_cfg, idx)
        ours, _ = ref.forward(p, cfg, idx, idx)
    err = float((theirs - ours[..., :cfg["V"]]).abs().max())
    # Same fp32 values, different summation orders: differences are rounding noise (~1e-7 at these sizes).
    if not err < 1e-5:
        sys.exit("HF forward of the written state dict differs from the reference model by %g" % err)
    tensors = {a.prefix + k: v.to(TORCH_DTYPES[a.dtype]) for k, v in sd.items()}
    if a.extras:
        T = cfg["maxT"]
        for l in range(cfg["L"]):
            tensors["h.%d.attn.bias" % l] = torch.tril(torch.ones(T, T, dtype=torch.float32)).view(1, 1, T, T)
            tensors["h.%d.attn.masked_bias" % l] = torch.tensor(-1e4)
        tensors["lm_head.weight"] = tensors[a.prefix + "wte.weight"].clone()
    if a.untied_head:
        tensors["lm_head.weight"] = tensors[a.prefix + "wte.weight"] * 0.5
    if a.drop:
        del tensors[a.drop]
    if a.as_f64:
        tensors[a.as_f64] = tensors[a.as_f64].double()
    if a.untransposed:
        tensors[a.untransposed] = tensors[a.untransposed].t().contiguous()
    if a.config_set:
        key, value = a.config_set.split("=", 1)
        hf_cfg[key] = json.loads(value)
    os.makedirs(a.out_dir, exist_ok=True)
    save_safetensors(os.path.join(a.out_dir, "model.safetensors"), tensors)
    with open(os.path.join(a.out_dir, "config.json"), "w") as f:
        json.dump(hf_cfg, f, indent=2)
    print("%s: HF GPT-2 (%s, prefix '%s'%s), HF forward matches the reference within %.2g" %
          (a.out_dir, a.dtype, a.prefix, ", mask buffers + lm_head" if a.extras else "", err))


if __name__ == "__main__":
    main()
