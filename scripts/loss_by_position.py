"""Per-token loss by position in the window, across the runs of a language-modelling sweep.

python scripts/loss_by_position.py <sweep dir> [--length 1024] [--bins 0,128,256,512,1024]
                                   [--width 32] [--reference rope] [--out DIR]

The per-token loss L(i) at window position i (i tokens of context) of each run's
``loss_by_position.json`` at one evaluation length, the quantity Lin et al. (2025, Forgetting
Transformer) plot beyond the training length. Per encoding (``pe`` in results.json), over its
seeds:

* ``loss_by_position_len<n>.{png,pdf}``: the mean over seeds of L(i) in bins of ``--width``
  positions, the seeds' range as a band, the training length marked; below it, each encoding
  minus ``--reference`` on the same tokens (the text's difficulty, which moves L(i) from bin to
  bin, cancels there);
* ``loss_by_position_len<n>.csv`` / ``.md``: the mean loss over the tokens of each of
  ``--bins`` (position ranges [a, b)), mean ± 95% Student-t half-width over seeds
  (``seed_statistics``, as aggregate.py), with each seed's value, and the same for each
  encoding minus ``--reference``, paired by seed;
* a ``unigram`` row: the loss, on the same tokens, of a unigram model fitted on the run's
  training tokens (add-one smoothing over the vocabulary), read from the tokenised corpus the
  run used (``data.cache`` in results.json); left out, with a note, where that cache is absent.

Windows and their scored positions are those of lengen's evaluation (``window_plan``).
"""

from __future__ import annotations

import argparse
import json
import sys
from collections import defaultdict
from itertools import pairwise
from pathlib import Path

import numpy as np

from lengen.caches import use_lengen_caches

use_lengen_caches()  # before matplotlib is imported (docs/scaling.md)


class Refusal(Exception):
    """A folder or option this script cannot use: one line, exit status 2."""


def bin_mean(loss: list[float], count: list[int], low: int, high: int) -> float:
    """Mean loss over the scored tokens at positions low … high − 1 (token-weighted)."""
    loss, count = np.asarray(loss[low:high], float), np.asarray(count[low:high], float)
    if count.sum() == 0:
        raise Refusal(f"no scored tokens at positions [{low}, {high})")
    return float((loss * count).sum() / count.sum())


def read_runs(folder: Path, length: int) -> tuple[dict[str, list[dict]], int]:
    """{pe: [run, …]} with each run's seed, curve at ``length`` and data record; train_len."""
    if not folder.is_dir():
        raise Refusal(f"{folder}: not a folder")
    by_pe, train_lens = defaultdict(list), set()
    for positions in sorted(folder.glob("*/loss_by_position.json")):
        results = positions.parent / "results.json"
        if not results.is_file():
            continue  # an unfinished run
        report, record = json.loads(positions.read_text()), json.loads(results.read_text())
        if report.get("protocol") != "nonoverlap" or str(length) not in report["lengths"]:
            continue
        curve = report["lengths"][str(length)]
        row = next(row for row in record["eval"] if row["length"] == length)
        by_pe[record["pe"]].append({
            "name": positions.parent.name, "seed": record["seed"], "data": record.get("data", {}),
            "loss": curve["loss"], "count": curve["count"], "stride": curve["stride"],
            "n_targets": row["tokens_scored"],
        })  # fmt: skip
        train_lens.add(record["train_len"])
    if not by_pe:
        raise Refusal(f"{folder}: no runs with a nonoverlap loss_by_position.json at {length}")
    if len(train_lens) > 1:
        raise Refusal(f"{folder}: runs trained at different lengths {sorted(train_lens)}")
    for pe, runs in by_pe.items():
        seeds = [run["seed"] for run in runs]
        if len(seeds) != len(set(seeds)):
            raise Refusal(f"{folder}: pe={pe} has two runs with the same seed ({seeds})")
    return dict(by_pe), train_lens.pop()


def unigram_curve(run: dict, length: int) -> tuple[list[float], list[int]] | None:
    """Loss by position of an add-one unigram model fitted on the run's training tokens,
    scored on the run's evaluation windows at ``length``; None without the tokenised corpus."""
    from lengen.evaluation.text import window_plan

    cache = run["data"].get("cache") or {}
    corpus = Path(cache.get("dir", "")) / "corpora" / str(cache.get("key"))
    if not (corpus / "train.npy").is_file() or not (corpus / "validation.npy").is_file():
        return None
    train_ids = np.load(corpus / "train.npy", mmap_mode="r")
    val_ids = np.load(corpus / "validation.npy", mmap_mode="r")
    vocab = int(run["data"].get("vocab_size") or max(train_ids.max(), val_ids.max()) + 1)
    counts = np.bincount(np.asarray(train_ids, dtype=np.int64), minlength=vocab) + 1.0
    nll = -np.log(counts / counts.sum())  # (V,)
    starts, first = window_plan(run["n_targets"], length, run["stride"])
    targets = np.asarray(val_ids)[starts[:, None] + 1 + np.arange(length)]  # (W, L)
    scored = np.arange(length)[None, :] >= first[:, None]  # (W, L)
    count = scored.sum(0)
    loss = np.where(scored, nll[targets], 0.0).sum(0) / np.maximum(count, 1)
    return loss.tolist(), count.tolist()


def seed_row(pe: str, label: str, low: int, high: int, values: dict[int, float]) -> dict:
    """Mean ± 95% half-width over the seeds' values ({seed: value}) in one table row."""
    from lengen.aggregate.stats import seed_statistics

    stats = seed_statistics(list(values.values()), higher_is_better=False)
    half = None if stats["ci95_high"] is None else stats["ci95_high"] - stats["mean"]
    return {"pe": pe, "quantity": label, "bin": f"[{low}, {high})", "n": stats["n"],
            "mean": stats["mean"], "ci95_half_width": half,
            "seeds": " ".join(f"{seed}:{value:.4f}" for seed, value in values.items())}  # fmt: skip


def bin_rows(by_pe, unigram, bins: list[int], reference: str | None) -> list[dict]:
    """Rows per encoding and bin: the loss over seeds; the unigram model's loss on the same
    tokens; and, for every other encoding, its difference from ``reference`` paired by seed
    (the same tokens, the same training seed) where both have that seed."""
    rows, edges = [], list(pairwise(bins))
    means = {
        pe: {run["seed"]: [bin_mean(run["loss"], run["count"], a, b) for a, b in edges]
             for run in sorted(runs, key=lambda run: run["seed"])}
        for pe, runs in sorted(by_pe.items())
    }  # fmt: skip
    for pe, by_seed in means.items():
        for k, (low, high) in enumerate(edges):
            values = {seed: curve[k] for seed, curve in by_seed.items()}
            rows.append(seed_row(pe, "loss", low, high, values))
    if unigram is not None:
        for low, high in edges:
            rows.append({"pe": "unigram", "quantity": "loss", "bin": f"[{low}, {high})",
                         "n": None, "mean": bin_mean(*unigram, low, high),
                         "ci95_half_width": None, "seeds": ""})  # fmt: skip
    if reference in means:
        for pe, by_seed in means.items():
            common = [seed for seed in by_seed if seed in means[reference]]
            if pe == reference or not common:
                continue
            for k, (low, high) in enumerate(edges):
                values = {s: by_seed[s][k] - means[reference][s][k] for s in common}
                rows.append(seed_row(pe, f"minus {reference}", low, high, values))
    return rows


def markdown(rows: list[dict], length: int, train_len: int) -> str:
    """The rows as Markdown tables, one per quantity (the loss, then each difference)."""
    bins = list(dict.fromkeys(row["bin"] for row in rows))

    def show(row) -> str:
        sign = "+" if row["quantity"] != "loss" else ""
        half = row["ci95_half_width"]
        return f"{row['mean']:{sign}.3f}" + ("" if half is None else f" ± {half:.3f}")

    lines = [f"Per-token loss (nats) at evaluation length {length}, training length {train_len}, "
             "mean over the tokens at the window positions of each bin: mean ± 95% t "
             "half-width over n seeds; differences paired by seed.", ""]  # fmt: skip
    for quantity in dict.fromkeys(row["quantity"] for row in rows):
        lines += ["| pe | quantity | n | " + " | ".join(bins) + " |",
                  "|---|---|---|" + "---|" * len(bins)]  # fmt: skip
        for pe in dict.fromkeys(row["pe"] for row in rows if row["quantity"] == quantity):
            cells = {r["bin"]: r for r in rows if r["pe"] == pe and r["quantity"] == quantity}
            n = next(iter(cells.values()))["n"]
            label = "unigram (baseline)" if pe == "unigram" else pe
            lines.append(f"| {label} | {quantity} | {n or '–'} | "
                         + " | ".join(show(cells[b]) for b in bins) + " |")  # fmt: skip
        lines.append("")
    return "\n".join(lines)


def plot(by_pe, unigram, length, train_len, width, reference, path: Path) -> None:
    """L(i) in bins of ``width`` positions per encoding (mean over seeds, the seeds' range as
    a band) and, below, each encoding minus ``reference`` on the same tokens."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    edges = list(zip(range(0, length, width), [*range(width, length, width), length], strict=True))
    centres = [(low + high - 1) / 2 for low, high in edges]
    curves = {pe: np.array([[bin_mean(run["loss"], run["count"], a, b) for a, b in edges]
                            for run in runs]) for pe, runs in sorted(by_pe.items())}  # fmt: skip
    panels = 2 if reference in curves and len(curves) > 1 else 1
    fig, axes = plt.subplots(panels, 1, figsize=(7.5, 3.4 * panels + 0.6), sharex=True,
                             squeeze=False, height_ratios=[1.4, 1][:panels])  # fmt: skip
    top = axes[0, 0]
    colours = {}
    for pe, curve in curves.items():
        seeds = f"{len(curve)} seed" + "s" * (len(curve) > 1)
        (line,) = top.plot(centres, curve.mean(0), marker=".", label=f"{pe} ({seeds})")
        top.fill_between(centres, curve.min(0), curve.max(0), color=line.get_color(), alpha=0.2)
        colours[pe] = line.get_color()
    title = f"per-token loss at evaluation length {length}: mean over seeds, band: seeds' range"
    if unigram is not None:
        title += f"\nunigram baseline on the same tokens: {bin_mean(*unigram, 0, length):.2f} nats"
    top.set_title(title, fontsize=9)
    top.set_ylabel("loss L(i), nats")
    if panels == 2:
        bottom = axes[1, 0]
        base = curves[reference].mean(0)
        for pe, curve in curves.items():
            if pe != reference:
                difference = curve - base
                bottom.plot(centres, difference.mean(0), marker=".", color=colours[pe],
                            label=f"{pe} − {reference}")  # fmt: skip
                bottom.fill_between(centres, difference.min(0), difference.max(0),
                                    color=colours[pe], alpha=0.2)  # fmt: skip
        bottom.axhline(0, color=colours[reference], linewidth=1)
        bottom.set_ylabel(f"minus {reference}, nats")
        bottom.legend(fontsize=8)
    for ax in axes[:, 0]:
        ax.axvline(train_len, color="black", linestyle="--", linewidth=1,
                   label=f"training length {train_len}")  # fmt: skip
        ax.grid(alpha=0.3)
    top.legend(fontsize=8)
    axes[-1, 0].set_xlabel(f"position i in the window (i tokens of context; bins of {width})")
    axes[-1, 0].set_xlim(0, length)
    fig.tight_layout()
    fig.savefig(path.with_suffix(".png"), dpi=150)
    fig.savefig(path.with_suffix(".pdf"))
    plt.close(fig)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("folder", type=Path)
    parser.add_argument("--length", type=int, default=1024, help="evaluation length to read")
    parser.add_argument("--bins", default="0,128,256,512,1024", help="edges of the table's bins")
    parser.add_argument("--width", type=int, default=32, help="positions per point of the figure")
    parser.add_argument("--reference", default="rope", help="encoding the others are compared with")
    parser.add_argument("--out", type=Path, help="where to write (default: the folder)")
    args = parser.parse_args(argv)
    try:
        bins = [int(edge) for edge in args.bins.split(",")]
        if len(bins) < 2 or bins != sorted(set(bins)) or bins[0] < 0 or bins[-1] > args.length:
            raise Refusal(f"--bins must rise within 0 … {args.length}, got {args.bins}")
        if args.width < 1:
            raise Refusal(f"--width must be ≥ 1, got {args.width}")
        by_pe, train_len = read_runs(args.folder, args.length)
        first = next(iter(by_pe.values()))[0]
        unigram = unigram_curve(first, args.length)
        rows = bin_rows(by_pe, unigram, bins, args.reference)
    except (Refusal, ValueError) as error:
        print(f"loss_by_position.py: {error}", file=sys.stderr)
        return 2
    out = args.out or args.folder
    out.mkdir(parents=True, exist_ok=True)
    stem = out / f"loss_by_position_len{args.length}"
    import pandas as pd

    pd.DataFrame(rows).to_csv(stem.with_suffix(".csv"), index=False)
    table = markdown(rows, args.length, train_len)
    if unigram is None:
        table += "\nNo unigram baseline: the runs' tokenised corpus (data.cache) is not here.\n"
    stem.with_suffix(".md").write_text(table)
    width = min(args.width, args.length)  # wider than the window: one point for all of it
    plot(by_pe, unigram, args.length, train_len, width, args.reference, stem)
    print(table, end="")
    print(f"wrote {stem}.{{csv,md,png,pdf}}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
