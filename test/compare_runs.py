#!/usr/bin/python3
"""Compares two training runs' metrics.jsonl (train and val losses) and final model.bin (fp32 llm.c model files).

usage: compare_runs.py RUN_A RUN_B LOSS_RTOL PARAM_ATOL   (exit 0 when within tolerance; the last line summarises)
"""
import json
import struct
import sys

import numpy as np


def losses(run):
    train, val = {}, {}
    for line in open(run + "/metrics.jsonl"):
        r = json.loads(line)
        if "train_loss" in r:
            train[r["step"]] = r["train_loss"]
        if "val_loss" in r:
            val[r["step"]] = r["val_loss"]
    return train, val


def params(run):
    with open(run + "/model.bin", "rb") as f:
        header = struct.unpack("<256i", f.read(1024))
        assert header[0] == 20240326 and header[1] == 3, header[:2]
        return np.frombuffer(f.read(), dtype="<f4")


def main():
    a, b, rtol, atol = sys.argv[1], sys.argv[2], float(sys.argv[3]), float(sys.argv[4])
    (ta, va), (tb, vb) = losses(a), losses(b)
    if ta.keys() != tb.keys() or va.keys() != vb.keys() or not ta:
        sys.exit("different steps logged: %s vs %s" % (sorted(ta), sorted(tb)))
    worst = 0.0
    for k in ta:
        worst = max(worst, abs(ta[k] - tb[k]) / abs(ta[k]))
    for k in va:
        worst = max(worst, abs(va[k] - vb[k]) / abs(va[k]))
    pa, pb = params(a), params(b)
    if pa.shape != pb.shape:
        sys.exit("parameter counts differ")
    pdiff = float(np.max(np.abs(pa.astype(np.float64) - pb)))
    print("max loss rel diff %.2e, max param abs diff %.2e" % (worst, pdiff))
    if worst > rtol or pdiff > atol:
        sys.exit("outside tolerance (loss rtol %g, param atol %g)" % (rtol, atol))


if __name__ == "__main__":
    main()
