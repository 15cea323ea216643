#!/usr/bin/python3
"""How far a reference file's step-1 gradient norm is from the float64 norm of the gradients it holds, in float32
ulps (step 1 is at the initial weights, whose gradients the file holds; docs/reference.md has the layout).

usage: norm_ulps.py REFERENCE.bin     prints the number of ulps
"""
import sys

import numpy as np


def main():
    if len(sys.argv) != 2:
        sys.exit(__doc__.strip().splitlines()[-1])
    raw = open(sys.argv[1], "rb").read()
    h = np.frombuffer(raw[:1024], "<i4")
    B, T, Vp, S, P = (int(h[i]) for i in (2, 3, 9, 10, 11))
    off = 1024 + 4 * (2 * B * T + B * T * Vp + 1)  # the gradients follow the batch, the logits and the loss
    grads = np.frombuffer(raw[off:off + 4 * P], "<f4")
    norm0 = np.frombuffer(raw[off + 4 * (P + S):off + 4 * (P + S + 1)], "<f4")[0]  # after the S step losses
    exact = np.float32(np.sqrt(np.sum(grads.astype(np.float64) ** 2)))
    print(abs(int(norm0.view(np.int32)) - int(exact.view(np.int32))))


if __name__ == "__main__":
    main()
