#!/usr/bin/env python3
"""Plot a run's metrics.jsonl: train and val loss against the step, and throughput (tokens/s).

usage: plot_metrics.py METRICS_JSONL OUT_PNG
"""
import json
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402


def main():
    if len(sys.argv) != 3:
        sys.exit("usage: plot_metrics.py METRICS_JSONL OUT_PNG")
    rows = []
    with open(sys.argv[1]) as f:
        for n, line in enumerate(f, 1):
            try:
                rows.append(json.loads(line))
            except json.JSONDecodeError as e:
                sys.exit("error: %s line %d is not JSON (%s)" % (sys.argv[1], n, e))
    train = [(r["step"], r["train_loss"]) for r in rows if "train_loss" in r]
    val = [(r["step"], r["val_loss"]) for r in rows if "val_loss" in r]
    speed = [(r["step"], r["tokens_per_sec"]) for r in rows if "tokens_per_sec" in r]
    if not train and not val:
        sys.exit("error: %s has no train_loss or val_loss records" % sys.argv[1])
    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(12, 4.5))
    if train:
        ax1.plot(*zip(*train), label="train loss", lw=1)
    if val:
        ax1.plot(*zip(*val), "o-", label="val loss")
    ax1.set_xlabel("step")
    ax1.set_ylabel("loss (nats/token)")
    ax1.legend()
    ax1.grid(alpha=0.3)
    if speed:
        ax2.plot(*zip(*speed), lw=1)
    ax2.set_xlabel("step")
    ax2.set_ylabel("tokens/s")
    ax2.grid(alpha=0.3)
    fig.suptitle(sys.argv[1])
    fig.tight_layout()
    fig.savefig(sys.argv[2], dpi=100)
    print("wrote %s" % sys.argv[2])


if __name__ == "__main__":
    main()
