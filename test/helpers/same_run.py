#!/usr/bin/env python3
"""same_run.py A B [rtol]: the runs in directories A and B agree: the steps, train and val losses, skip decisions and
outlier z-scores of A/metrics.jsonl and B/metrics.jsonl (exactly when rtol is 0), and A/model.bin and B/model.bin
(byte-identical when rtol is 0, else every parameter to rtol relative). Exit status 0 when they agree."""
import json, struct, sys
a_dir, b_dir, rtol = sys.argv[1], sys.argv[2], float(sys.argv[3]) if len(sys.argv) > 3 else 0.0
def rows(d):
    return [(r["step"], "train_loss" in r, r.get("train_loss"), r.get("val_loss"), r.get("skipped"),
             r.get("loss_z"), r.get("grad_norm_z"))
            for r in map(json.loads, open(d + "/metrics.jsonl"))]
a, b = rows(a_dir), rows(b_dir)
assert len(a) == len(b), ("metrics lines", len(a), len(b))
for x, y in zip(a, b):
    assert x[:2] == y[:2] and x[4] == y[4], (x, y)
    if rtol == 0: assert x[5:] == y[5:], (x, y)
    for u, v in ((x[2], y[2]), (x[3], y[3])):
        if rtol == 0: assert u == v, (x, y)
        elif u is not None: assert abs(u - v) <= rtol * abs(u), (x, y)
ma, mb = open(a_dir + "/model.bin", "rb").read(), open(b_dir + "/model.bin", "rb").read()
if rtol == 0:
    assert ma == mb, "model.bin differs"
else:
    assert len(ma) == len(mb) and ma[:1024] == mb[:1024]
    pa = struct.unpack("<%df" % ((len(ma) - 1024) // 4), ma[1024:])
    pb = struct.unpack("<%df" % ((len(mb) - 1024) // 4), mb[1024:])
    worst = max(abs(p - q) / (abs(p) + 1e-3) for p, q in zip(pa, pb))
    assert worst <= rtol, ("params differ", worst)
print("%d metrics lines agree%s" % (len(a), "" if rtol == 0 else " to %g" % rtol))
