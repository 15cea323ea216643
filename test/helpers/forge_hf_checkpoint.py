#!/usr/bin/env python3
"""Forges a copy of a Hugging Face checkpoint directory (config.json + model.safetensors, as ./export_hf writes it)
with one defect, for test/e2e/tool_refusals_test.sh. Every forgery keeps the file sizes consistent, so that only
the check meant for the defect can refuse it.

usage: forge_hf_checkpoint.py SRC_DIR OUT_DIR FORGERY [FORGERY ...]   (applied in order)
  overlap             the second tensor's data_offsets moved 4 bytes back, into the first one's bytes
  duplicate           ln_f.weight named twice in the header (the second entry: ln_f.bias's bytes, of the same size)
  fractional-offset   the last tensor's offsets written as numbers with a fraction (begin + 0.5)
  fractional-shape    ln_f.bias's shape [C + 0.5]
  shape-number        ln_f.bias's shape as a number instead of an array
  shape-object        ln_f.bias's shape as an object
  deep:KEY:DEPTH      config.json's KEY an array nested DEPTH deep
  config:KEY=JSON     config.json's KEY set to JSON (its text as given)
  trailing            text after config.json's object
"""
import json
import os
import shutil
import struct
import sys


def read_header(path):
    raw = open(path, "rb").read()
    n = struct.unpack("<Q", raw[:8])[0]
    return json.loads(raw[8:8 + n]), raw[8 + n:]


def write_safetensors(path, header_text, data):
    text = header_text.encode()
    text += b" " * (-len(text) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)) + text + data)


def forge_header(header, forgery):
    """The header's JSON text with the forgery applied."""
    names = [k for k in header if k != "__metadata__"]
    by_offset = sorted(names, key=lambda k: header[k]["data_offsets"][0])
    first, second, last = by_offset[0], by_offset[1], by_offset[-1]
    lnf = next(k for k in names if k.endswith("ln_f.bias"))
    lnf_w = next(k for k in names if k.endswith("ln_f.weight"))
    if forgery == "overlap":
        b, e = header[second]["data_offsets"]
        header[second]["data_offsets"] = [b - 4, e - 4]
    elif forgery == "fractional-shape":
        header[lnf]["shape"] = [header[lnf]["shape"][0] + 0.5]
    elif forgery == "shape-number":
        header[lnf]["shape"] = header[lnf]["shape"][0]
    elif forgery == "shape-object":
        header[lnf]["shape"] = {"n": header[lnf]["shape"][0]}
    text = json.dumps(header)
    if forgery == "fractional-offset":
        b, e = header[last]["data_offsets"]
        text = text.replace(json.dumps({"data_offsets": [b, e]})[1:-1], '"data_offsets": [%d.5, %d.5]' % (b, e))
    if forgery == "duplicate":  # a JSON writer cannot emit a key twice: the text is written by hand
        again = dict(header[lnf_w], data_offsets=header[lnf]["data_offsets"])
        text = text[:-1] + ", " + json.dumps(lnf_w) + ": " + json.dumps(again) + "}"
    return text


def forge_config(text, forgery):
    if forgery == "trailing":
        return text + "\n{\"n_layer\": 99}\n"
    cfg = json.loads(text)
    if forgery.startswith("deep:"):
        _, key, depth = forgery.split(":")
        marker = "@@DEEP@@"
        cfg[key] = marker
        return json.dumps(cfg).replace(json.dumps(marker), "[" * int(depth) + "]" * int(depth))
    key, value = forgery[len("config:"):].split("=", 1)
    cfg[key] = "@@VALUE@@"
    return json.dumps(cfg).replace(json.dumps("@@VALUE@@"), value)


def main():
    if len(sys.argv) < 4:
        sys.exit(__doc__.strip().splitlines()[3])
    src, out = sys.argv[1:3]
    shutil.rmtree(out, ignore_errors=True)
    shutil.copytree(src, out)
    st = os.path.join(out, "model.safetensors")
    for forgery in sys.argv[3:]:
        if forgery == "trailing" or forgery.startswith(("deep:", "config:")):
            path = os.path.join(out, "config.json")
            text = forge_config(open(path).read(), forgery)
            open(path, "w").write(text)
        else:
            header, data = read_header(st)
            write_safetensors(st, forge_header(header, forgery), data)


if __name__ == "__main__":
    main()
