#!/usr/bin/env python3
"""Plot runs' metrics.jsonl: train and val loss against the step, and throughput (tokens/s); several runs overlaid.

usage: plot_metrics.py RUN [RUN ...] [-o OUT_PNG]
  RUN      a metrics.jsonl file, or an output directory (-o of the trainer) holding one
  -o       the PNG to write (default: loss.png next to the first run's metrics.jsonl)
The old form `plot_metrics.py METRICS_JSONL OUT_PNG` works too. Needs matplotlib (python3-matplotlib, or pip); a Python
without it (a virtual environment) hands the plot to /usr/bin/python3 when that one has it.
"""
import json
import os
import subprocess
import sys


def load(path):
    """(label, rows) of one run; exits with one line on a missing or malformed file."""
    if os.path.isdir(path):
        path = os.path.join(path, "metrics.jsonl")
    try:
        f = open(path)
    except OSError as e:
        sys.exit("error: %s: cannot open (%s)" % (path, e.strerror))
    rows = []
    with f:
        for n, line in enumerate(f, 1):
            try:
                rows.append(json.loads(line))
            except json.JSONDecodeError as e:
                sys.exit("error: %s line %d is not JSON (%s)" % (path, n, e))
    if not any("train_loss" in r or "val_loss" in r for r in rows):
        sys.exit("error: %s has no train_loss or val_loss records" % path)
    return os.path.dirname(path) or path, path, rows


SYSTEM_PYTHON = "/usr/bin/python3"


def use_system_python_or_exit():
    """This Python has no matplotlib (a virtual environment, pyenv, conda): rerun the script with the system's Python
    when that one has it (Debian's python3-matplotlib installs it there only), else say what to install where."""
    rerun = os.environ.get("PLOT_METRICS_RERUN") == "1"  # already the rerun: never loop
    system_has_it = not rerun and os.access(SYSTEM_PYTHON, os.X_OK) and \
        subprocess.run([SYSTEM_PYTHON, "-c", "import matplotlib"], stderr=subprocess.DEVNULL).returncode == 0
    if system_has_it:
        print("note: %s has no matplotlib; plotting with %s" % (sys.executable, SYSTEM_PYTHON), file=sys.stderr)
        os.environ["PLOT_METRICS_RERUN"] = "1"
        os.execv(SYSTEM_PYTHON, [SYSTEM_PYTHON, os.path.abspath(__file__)] + sys.argv[1:])
    if sys.executable == SYSTEM_PYTHON:
        sys.exit("error: %s has no matplotlib (apt install python3-matplotlib)" % sys.executable)
    sys.exit("error: %s has no matplotlib, nor has %s: pip install matplotlib into %s (apt's python3-matplotlib "
             "serves %s only)" % (sys.executable, SYSTEM_PYTHON, sys.executable, SYSTEM_PYTHON))


def parse_args(argv):
    args, out = [], None
    i = 0
    while i < len(argv):
        if argv[i] in ("-h", "--help"):
            print(__doc__.strip())
            sys.exit(0)
        if argv[i] == "-o":
            if i + 1 >= len(argv):
                sys.exit("error: -o needs a file name")
            out, i = argv[i + 1], i + 2
            continue
        args.append(argv[i])
        i += 1
    if out is None and len(args) == 2 and args[1].endswith(".png"):  # the old two-argument form
        args, out = args[:1], args[1]
    if not args:
        sys.exit("usage: plot_metrics.py RUN [RUN ...] [-o OUT_PNG] (see --help)")
    return args, out


def main():
    runs, out = parse_args(sys.argv[1:])
    loaded = [load(r) for r in runs]  # every file checked before anything is drawn
    if out is None:
        out = os.path.join(os.path.dirname(loaded[0][1]), "loss.png")
    try:
        import matplotlib
    except ImportError:
        use_system_python_or_exit()
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(12, 4.5))
    for k, (label, _, rows) in enumerate(loaded):
        color = "C%d" % (k % 10)
        train = [(r["step"], r["train_loss"]) for r in rows if "train_loss" in r]
        val = [(r["step"], r["val_loss"]) for r in rows if "val_loss" in r]
        speed = [(r["step"], r["tokens_per_sec"]) for r in rows if "tokens_per_sec" in r]
        if train:
            ax1.plot(*zip(*train), color=color, lw=1, alpha=0.7, label="%s train" % label)
        if val:
            ax1.plot(*zip(*val), "o-", color=color, label="%s val" % label)
        if speed:
            ax2.plot(*zip(*speed), color=color, lw=1, label=label)
    ax1.set_xlabel("step")
    ax1.set_ylabel("loss (nats/token)")
    ax1.legend(fontsize=8)
    ax1.grid(alpha=0.3)
    ax2.set_xlabel("step")
    ax2.set_ylabel("tokens/s")
    ax2.grid(alpha=0.3)
    if len(loaded) > 1:
        ax2.legend(fontsize=8)
    fig.suptitle(", ".join(label for label, _, _ in loaded))
    fig.tight_layout()
    try:
        fig.savefig(out, dpi=100)
    except OSError as e:
        sys.exit("error: %s: cannot write (%s)" % (out, e.strerror))
    print("wrote %s (%d run%s)" % (out, len(loaded), "s" if len(loaded) > 1 else ""))


if __name__ == "__main__":
    main()
