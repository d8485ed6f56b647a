"""The Chomsky benchmark's own score for each run of a sweep, beside the published numbers.

python scripts/chomsky_scores.py <sweep dir>    -> <sweep dir>/paper_scores.md and .csv

Delétang et al. (2023, §4 and App. A.4) score a run by its per-token accuracy averaged over
every test length beyond training ("score := 1/(M−N) Σ_{ℓ=N+1}^{M} A(x, y)", lengths 41…500)
and report, per task, the maximum over 10 seeds, 3 learning rates and 5 positional encodings;
Ruoss et al. (2023) score the same way. This computes that score per run — the mean over the
sweep's evaluation lengths beyond ``data.len`` (evenly spaced ``eval.lengths`` make it the
papers' uniform average) — the same mean of greedy exact match and of the trivial baseline,
then per task × encoding × randomized positions: runs, runs that reached the training
criterion, mean ± 95% t half-width over seeds and the best seed. Per task, the best run of
any encoding without randomized positions stands beside Delétang et al.'s Transformer column
(itself a maximum over encodings and seeds). docs/reproductions.md, section (c).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import pandas as pd

from lengen.aggregate import load_sweep
from lengen.aggregate.stats import seed_statistics
from lengen.atomic import atomic_write

#: Delétang et al. (2023), Table 2, Transformer column (score %, best over encodings and seeds),
#: where it could be read offline: task -> (published value or None, where it stands)
PUBLISHED = {
    "even_pairs": (None, '≥ 90: "they solve Even Pairs" (§5.4; solve = score ≥ 90%)'),
    "cycle_navigation": (
        61.9,
        '"non-trivial generalization score (61.9% with baseline 20%)" (App. B.3.2)',
    ),
    "reverse": (62.3, "Table 2, Reverse String, as reprinted by Xu et al. (2025), App. D, Table 5"),
}
GROUP = ["data.name", "pe.name", "pe.randomized"]
COLUMNS = (
    *GROUP,
    "runs",
    "reached_criterion",
    "seeds",
    "score_mean",
    "score_ci95",
    "score_best",
    "exact_match_mean",
    "exact_match_ci95",
    "exact_match_best",
    "baseline_score",
    "chance",
)


def run_scores(frame: pd.DataFrame) -> pd.DataFrame:
    """One row per finished run: its score (per-token accuracy averaged over the lengths beyond
    training), the same average of exact match and of the baseline, and its criterion."""
    optional = ["pe.randomized", "baseline_accuracy", "criterion_reached"]  # NaN where absent
    frame = frame.reindex(columns=list(dict.fromkeys([*frame.columns, *optional])))
    finished = frame[frame["status"].isin(["ok", "not_learned"])]
    beyond = finished[finished["length"] > finished["data.len"]]
    return (
        beyond.groupby([*GROUP, "run_dir"], sort=True, dropna=False)
        .agg(
            seed=("seed", "first"),
            score=("accuracy", "mean"),
            exact_match=("exact_match", "mean"),
            baseline=("baseline_accuracy", "mean"),
            chance=("chance_accuracy", "first"),
            reached=("criterion_reached", "first"),
        )
        .reset_index()
    )


def config_scores(runs: pd.DataFrame) -> pd.DataFrame:
    """Per task × encoding × randomized: the statistics over seeds of :func:`run_scores`."""
    rows = []
    for key, members in runs.groupby(GROUP, sort=True, dropna=False):
        score = seed_statistics(list(members["score"]), higher_is_better=True)
        exact = seed_statistics(list(members["exact_match"]), higher_is_better=True)
        rows.append(
            {
                **dict(zip(GROUP, key, strict=True)),
                "runs": len(members),
                "reached_criterion": int((members["reached"] == True).sum()),  # noqa: E712 (None)
                "seeds": " ".join(str(int(seed)) for seed in sorted(members["seed"])),
                "score_mean": score["mean"],
                "score_ci95": _half_width(score),
                "score_best": score["best_of_seeds"],
                "exact_match_mean": exact["mean"],
                "exact_match_ci95": _half_width(exact),
                "exact_match_best": exact["best_of_seeds"],
                "baseline_score": members["baseline"].mean(),
                "chance": members["chance"].iloc[0],
            }
        )
    return pd.DataFrame(rows, columns=list(COLUMNS))


def _half_width(stats: dict) -> float | None:
    return None if stats["ci95_high"] is None else stats["ci95_high"] - stats["mean"]


def _pct(value, half_width=None) -> str:
    if value is None or pd.isna(value):
        return "–"
    return f"{100 * value:.1f}" + (
        "" if half_width is None or pd.isna(half_width) else f" ± {100 * half_width:.1f}"
    )


def markdown(table: pd.DataFrame, runs: pd.DataFrame, folder: Path) -> str:
    """The per-configuration table and, per task, the best plain run beside the paper."""
    lines = [
        f"# Chomsky-benchmark scores: `{folder}`",
        "",
        "Score = per-token accuracy averaged over the evaluation lengths beyond training "
        "(Delétang et al. 2023, App. A.4), in %; mean ± 95% t half-width over seeds [best "
        "seed]. Exact match: the same average of greedy exact match. Baseline: the best "
        "constant answer per position, averaged the same way.",
        "",
        "| task | pe | randomized | runs (reached criterion) | score | exact match | baseline "
        "| chance |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for row in table.to_dict("records"):
        lines.append(
            f"| {row['data.name']} | {row['pe.name']} | {'yes' if row['pe.randomized'] else 'no'} "
            f"| {row['runs']} ({row['reached_criterion']}) "
            f"| {_pct(row['score_mean'], row['score_ci95'])} [{_pct(row['score_best'])}] "
            f"| {_pct(row['exact_match_mean'], row['exact_match_ci95'])} "
            f"[{_pct(row['exact_match_best'])}] | {_pct(row['baseline_score'])} "
            f"| {_pct(row['chance'])} |"
        )
    lines += [
        "",
        "Best run per task of any encoding without randomized positions, beside Delétang et "
        "al.'s Transformer column (the maximum over their encodings and seeds):",
        "",
        "| task | best run | its score | published | where |",
        "|---|---|---|---|---|",
    ]
    plain = runs[runs["pe.randomized"] != True]  # noqa: E712 (a missing key is not randomized)
    for task, members in plain.groupby("data.name", sort=True):
        best = members.loc[members["score"].idxmax()]
        value, where = PUBLISHED.get(task, (None, "not read"))
        lines.append(
            f"| {task} | {best['pe.name']} seed {int(best['seed'])} | {_pct(best['score'])} "
            f"| {'–' if value is None else f'{value:.1f}'} | {where} |"
        )
    return "\n".join([*lines, ""])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("folder", type=Path, help="a sweep folder of task runs")
    folder = parser.parse_args(argv).folder
    try:
        frame = load_sweep(folder)
    except FileNotFoundError as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    runs = run_scores(frame) if "accuracy" in frame else frame[:0]
    if runs.empty or runs["score"].isna().all():
        print(
            f"error: {folder}: no finished task runs evaluated beyond their training length",
            file=sys.stderr,
        )
        return 2
    table = config_scores(runs)
    atomic_write(folder / "paper_scores.csv", table.to_csv(index=False, lineterminator="\n"))
    atomic_write(folder / "paper_scores.md", markdown(table, runs, folder))
    print(f"{len(runs)} run(s) in {len(table)} configuration(s) -> {folder / 'paper_scores.md'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
