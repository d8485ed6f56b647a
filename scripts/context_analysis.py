"""Why does perplexity fall past the training length? The early-token curse, measured.

python scripts/context_analysis.py <sweep dir> [--tag sliding32]

For each encoding of a language-modelling sweep (mean over seeds), three perplexities per
evaluation length n:

* ``nonoverlap``: the run's own evaluation (disjoint windows of n tokens; a token at position p
  sees p tokens of context, so short-context tokens make up a smaller share as n grows);
* ``short-context model``: what ``nonoverlap`` would give if every token at position p ≥ L
  scored as a token at the end of a training-length window does (the mean loss of positions
  L/2 … L−1 at length L) and the first L positions as at length L: a model that neither uses
  context beyond L nor is harmed by it. The only thing that changes with n is the share of
  short-context tokens;
* the tagged evaluation (``sliding``, stride S): every scored token sees at least n − S tokens
  of context, so the early-token share is the same at every n and a fall with n would mean
  the model uses the longer context.

Press et al. (2022, appendix B) make this argument with sliding windows of stride 1. Reads each
run's ``results.json``, ``loss_by_position.json`` and ``results.<tag>.json``; prints a Markdown
table. Runs without a nonoverlap ``loss_by_position.json`` (tasks, sliding runs) are skipped.
"""

from __future__ import annotations

import argparse
import json
import math
from collections import defaultdict
from pathlib import Path
from statistics import mean


def short_context_loss(curve: list[float], n: int) -> float:
    """Mean loss over a window of n tokens if positions ≥ L kept the loss of positions L/2…L−1."""
    length = len(curve)
    tail = mean(curve[length // 2 :])
    return (sum(curve[: min(n, length)]) + max(0, n - length) * tail) / n


def run_rows(run: Path, tag: str) -> tuple[str, dict[int, tuple]] | None:
    """(pe, {n: (nonoverlap loss, short-context loss, tagged loss)}) for one run, None if it
    has no nonoverlap loss-by-position record (tasks, sliding runs)."""
    positions = run / "loss_by_position.json"
    if not positions.exists():  # written by language-modelling runs only
        return None
    by_position = json.loads(positions.read_text())
    if by_position["protocol"] != "nonoverlap":
        return None
    record = json.loads((run / "results.json").read_text())
    curve = by_position["lengths"][str(record["train_len"])]["loss"]
    tagged_file = run / f"results.{tag}.json"
    tagged = {}
    if tagged_file.exists():
        tagged = {row["length"]: row["loss"] for row in json.loads(tagged_file.read_text())["eval"]}
    return record["pe"], {
        row["length"]: (
            row["loss"],
            short_context_loss(curve, row["length"]),
            tagged.get(row["length"]),
        )
        for row in record["eval"]
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("folder", type=Path)
    parser.add_argument("--tag", default="sliding32", help="eval.py tag of the sliding evaluation")
    args = parser.parse_args(argv)
    by_pe: dict[str, list[dict]] = defaultdict(list)
    for results in sorted(args.folder.glob("*/results.json")):
        found = run_rows(results.parent, args.tag)
        if found is not None:
            by_pe[found[0]].append(found[1])
    if not by_pe:
        print(f"{args.folder}: no language-modelling runs with loss_by_position.json")
        return 1
    print(f"perplexity, mean over seeds (n runs); `{args.tag}`: results.{args.tag}.json\n")
    print(f"| pe | n runs | length | nonoverlap | short-context model | {args.tag} |")
    print("|---|---|---|---|---|---|")
    for pe, runs in sorted(by_pe.items()):
        for length in sorted(runs[0]):
            cells = [[run[length][i] for run in runs] for i in range(3)]
            shown = [
                f"{math.exp(mean(c)):.1f}" if None not in c else "–" for c in cells
            ]  # exp of the mean loss over seeds
            print(f"| {pe} | {len(runs)} | {length} | " + " | ".join(shown) + " |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
