#!/usr/bin/env python3
"""Reads the runs of dev/bench/recipe_tokens_to_target.sh (OUT_DIR/gpt2_lr*/ and OUT_DIR/speedrun_x*/, each with its
metrics.jsonl), prints each run's final validation loss, picks each recipe's best run (lowest final val loss), takes
the best GPT-2 run's final val loss as the target, and prints the tokens each best run needed to reach it (the first
evaluation at or below it, interpolated linearly between evaluations), their ratio, and a PNG of the best runs' val
curves (OUT_DIR/tokens_to_target.png).

usage: recipe_tokens_to_target.py OUT_DIR --tokens-per-step N
"""
import argparse
import glob
import json
import os


def val_curve(run_dir):
    points = []
    with open(os.path.join(run_dir, "metrics.jsonl")) as f:
        for line in f:
            r = json.loads(line)
            if "val_loss" in r:
                points.append((r["step"], r["val_loss"]))
    return sorted(points)


def tokens_to(points, target, tokens_per_step):
    """Tokens at the first evaluation at or below target, linearly interpolated from the one before; None if never."""
    prev = None
    for step, loss in points:
        if loss <= target:
            if prev is None or prev[1] == loss:
                return step * tokens_per_step
            s0, l0 = prev
            return (s0 + (step - s0) * (l0 - target) / (l0 - loss)) * tokens_per_step
        prev = (step, loss)
    return None


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("out")
    ap.add_argument("--tokens-per-step", type=int, required=True)
    a = ap.parse_args()
    runs = {}
    for d in sorted(glob.glob(os.path.join(a.out, "*_*"))):
        if os.path.isfile(os.path.join(d, "done")):  # finished runs only
            runs[os.path.basename(d)] = val_curve(d)
    best = {}
    for name, pts in runs.items():
        recipe = name.split("_")[0]
        print(f"{name:24s} final val loss {pts[-1][1]:.4f} (step {pts[-1][0]})")
        if recipe not in best or pts[-1][1] < runs[best[recipe]][-1][1]:
            best[recipe] = name
    if "gpt2" not in best or "speedrun" not in best:
        raise SystemExit("error: need finished gpt2_* and speedrun_* runs in " + a.out)
    target = runs[best["gpt2"]][-1][1]
    g = tokens_to(runs[best["gpt2"]], target, a.tokens_per_step)
    s = tokens_to(runs[best["speedrun"]], target, a.tokens_per_step)
    print(f"target: the best GPT-2 run's final val loss {target:.4f} ({best['gpt2']})")
    print(f"GPT-2 recipe ({best['gpt2']}): {g:.0f} tokens")
    if s is None:
        print(f"speedrun recipe ({best['speedrun']}): does not reach it (final {runs[best['speedrun']][-1][1]:.4f})")
    else:
        print(f"speedrun recipe ({best['speedrun']}): {s:.0f} tokens = {s / g:.2f} x the GPT-2 recipe's")
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("no matplotlib: no plot")
        return
    fig, ax = plt.subplots(figsize=(7, 4.5))
    for recipe in ("gpt2", "speedrun"):
        pts = runs[best[recipe]]
        ax.plot([p[0] * a.tokens_per_step for p in pts], [p[1] for p in pts], marker=".", label=best[recipe])
    ax.axhline(target, color="gray", linestyle="--", linewidth=1, label=f"target {target:.3f}")
    ax.set_xlabel("training tokens")
    ax.set_ylabel("validation loss")
    ax.set_title("tokens to the GPT-2 recipe's final validation loss")
    ax.legend()
    ax.grid(alpha=0.3)
    png = os.path.join(a.out, "tokens_to_target.png")
    fig.tight_layout()
    fig.savefig(png, dpi=100)
    print(f"plot: {png}")


if __name__ == "__main__":
    main()
