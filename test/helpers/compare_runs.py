#!/usr/bin/python3
"""Compares two training runs: metrics.jsonl (train loss, val loss and grad norm of every logged step) and the final
model.bin (fp32 model files: llm.c's version 3, or version 6 of another architecture).

usage: compare_runs.py RUN_A RUN_B LOSS_RTOL PARAM_ATOL [NORM_RTOL] [--first-rtol LOSS_RTOL_0 NORM_RTOL_0]
                      [--param-rtol PARAM_RTOL]
  LOSS_RTOL    relative tolerance of the train and val losses
  PARAM_ATOL   absolute tolerance of the final parameters
  NORM_RTOL    relative tolerance of the grad norms (default: LOSS_RTOL)
  --param-rtol each parameter may also differ by PARAM_RTOL x max(|a|, |b|) (default 0): one bf16 ulp is at most
               2^-7 of the value, for runs whose bf16 parameters can round to different neighbours
  --first-rtol the relative tolerances of what both runs compute from identical parameters, the initial ones: the
               val loss of step 0 and the train loss of step 1 (LOSS_RTOL_0), the grad norm of step 1 (NORM_RTOL_0);
               these records are also held to LOSS_RTOL and NORM_RTOL
Exit 0 when everything is within tolerance (0 0: bit-identical); the last line summarises or says what differs.
"""
import json
import struct
import sys

import numpy as np


def metrics(run):
    series = {"train_loss": {}, "val_loss": {}, "grad_norm": {}}
    for line in open(run + "/metrics.jsonl"):
        r = json.loads(line)
        for key, values in series.items():
            if key in r:
                values[r["step"]] = r[key]
    return series


def params(run):
    with open(run + "/model.bin", "rb") as f:
        header = struct.unpack("<256i", f.read(1024))
        assert header[0] == 20240326 and header[1] in (3, 6), header[:2]  # fp32: llm.c's, or a named architecture
        return np.frombuffer(f.read(), dtype="<f4")


def worst_relative(a, b, key, steps=None):
    """The largest |a - b| / |a| over the steps of one series (only `steps`, when given); the steps must be the
    same."""
    if a.keys() != b.keys():
        sys.exit("different steps logged for %s: %s vs %s" % (key, sorted(a), sorted(b)))
    worst = 0.0
    for step in a:
        if steps is not None and step not in steps:
            continue
        x, y = a[step], b[step]
        if x is None or y is None:  # a non-finite value is logged as null
            if x is not None or y is not None:
                sys.exit("%s at step %d: %s vs %s" % (key, step, x, y))
            continue
        if x != y:
            worst = max(worst, abs(x - y) / abs(x) if x != 0 else float("inf"))
    return worst


def main():
    args = sys.argv[1:]
    first_rtol = None
    for flag, values in (("--first-rtol", 2), ("--param-rtol", 1)):
        if flag in args and len(args) < args.index(flag) + 1 + values:
            sys.exit("%s needs %d value(s)\n%s" % (flag, values, __doc__))
    if "--first-rtol" in args:
        i = args.index("--first-rtol")
        first_rtol = (float(args[i + 1]), float(args[i + 2]))
        del args[i:i + 3]
    param_rtol = 0.0
    if "--param-rtol" in args:
        i = args.index("--param-rtol")
        param_rtol = float(args[i + 1])
        del args[i:i + 2]
    if len(args) not in (4, 5):
        sys.exit(__doc__)
    a, b, rtol, atol = args[0], args[1], float(args[2]), float(args[3])
    norm_rtol = float(args[4]) if len(args) == 5 else rtol
    ma, mb = metrics(a), metrics(b)
    if not ma["train_loss"]:
        sys.exit("no train_loss in %s/metrics.jsonl" % a)
    if first_rtol is not None:  # the records taken at the initial parameters
        loss0 = max(worst_relative(ma[k], mb[k], k, {s}) for k, s in (("train_loss", 1), ("val_loss", 0)))
        norm0 = worst_relative(ma["grad_norm"], mb["grad_norm"], "grad_norm", {1})
        print("at the initial parameters: loss rel diff %.2e (rtol %g), grad norm rel diff %.2e (rtol %g)" %
              (loss0, first_rtol[0], norm0, first_rtol[1]))
        if loss0 > first_rtol[0] or norm0 > first_rtol[1]:
            sys.exit("outside tolerance at the initial parameters")
    loss = max(worst_relative(ma[k], mb[k], k) for k in ("train_loss", "val_loss"))
    norm = worst_relative(ma["grad_norm"], mb["grad_norm"], "grad_norm")
    pa, pb = params(a), params(b)
    if pa.shape != pb.shape:
        sys.exit("parameter counts differ")
    diff = np.abs(pa.astype(np.float64) - pb)
    pdiff = float(np.max(diff))
    # How far each element is past its allowance (<= 0: inside): atol, plus param_rtol of the larger magnitude.
    excess = diff - (atol + param_rtol * np.maximum(np.abs(pa), np.abs(pb)))
    worst = int(np.argmax(excess))
    print("max loss rel diff %.2e, max grad norm rel diff %.2e, max param abs diff %.2e" % (loss, norm, pdiff))
    if loss > rtol or norm > norm_rtol or excess[worst] > 0:
        sys.exit("outside tolerance (loss rtol %g, grad norm rtol %g, param atol %g, param rtol %g; parameter %d: "
                 "%.8g vs %.8g)" % (rtol, norm_rtol, atol, param_rtol, worst, pa[worst], pb[worst]))


if __name__ == "__main__":
    main()
