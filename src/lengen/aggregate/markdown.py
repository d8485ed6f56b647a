"""summary.md and extension.md: an aggregated sweep as text (settings, tables of mean ± CI,
ρ_τ, the ranking, flagged and failed runs). Formatting only: the numbers come from .stats."""

from __future__ import annotations

import pandas as pd

from lengen.aggregate.literature import paper_ratio_section
from lengen.aggregate.load import DESCRIBED
from lengen.aggregate.ranking import RANKING_COLUMNS, TABLE, ranking_columns
from lengen.aggregate.stats import Summary
from lengen.aggregate.verdicts import verdict_section
from lengen.identity import AVERAGED_MAY_DIFFER
from lengen.results import LM_FALLBACK_METRIC, METRIC_DIRECTIONS, ratio_key, results_name


def run_names(runs, limit: int | None = None) -> str:
    """The runs' directory names, comma-separated; the first ``limit`` and " …" after."""
    names = [run.name for run in runs]
    return ", ".join(names[:limit]) + (" …" if limit and len(names) > limit else "")


#: the rules summary.md states under Settings (``{ignored}``: the keys a configuration ignores)
RULES = """\
- Statistics over training seeds per configuration × length × protocol: mean, sample standard \
deviation (ddof = 1) and the 95% CI, Student t, n−1 degrees of freedom: mean ± t_{{0.975, n−1}} · \
std / √n. Tables show mean ± CI half-width. With one seed (n=1) there is no std and no CI. CIs \
are not clipped to [0, 1]. They describe variation over training seeds on the fixed evaluation \
set, not the sampling error of that set (`n_examples` per length in summary.csv).
- `best_of_seeds` (summary.csv): the best seed (max for accuracy / exact match, min for loss / \
ppl), for comparison with papers that report maxima; not an estimate of expected performance. \
`worst_of_seeds`, `min` and `max` beside it: the seeds as a distribution.
- Configuration = hash of the resolved config.yaml without {ignored}; runs that differ in \
anything else are never averaged together. Keys that set configurations apart within a table \
are listed under *settings*."""
RANKING = """\
## Ranking of positional encodings (mean reciprocal rank)

Within each comparison (same configuration apart from the PE, one length beyond the training \
length, one protocol) PEs are ranked by {statistic} metric, ties sharing the average rank; a PE's \
MRR is the mean of 1/rank over its comparisons (1 = always best). Comparisons with a single PE \
are skipped, and so are comparisons in which no encoding learned the task in distribution \
(listed below). `n_best`: first places, shared ones included (none where every PE ties).{ratios}
"""
#: how the text names each ``--statistic`` over seeds
STATISTIC_NAMES = {"mean": "mean", "max": "maximum over seeds", "min": "minimum over seeds"}
RATIOS = """\
## Length-generalisation ratio ρ_τ

Per run: the largest evaluated length / training length such that {score} is ≥ τ at every \
evaluated length from the training length up to it (a dip stops it, even where the curve \
recovers later). Over seeds: n, mean ± 95% CI half-width (Student t), sd, min and max; \
`ρ = 0 / ≥` counts the runs that missed τ at the training length itself (ρ = 0) and those that \
kept it up to their longest evaluated length ({longest}; ρ is a lower bound there). Per \
configuration and τ in `ratios.csv`.
"""
#: the marks a summary.md cell may carry -> their meaning
MARKS = {
    "[draws ±s]": "the std over the position draws that evaluation averaged over (randomized "
    "positions; mean over seeds, `draw_std` in summary.csv)",
    "≤b": "not above the trivial baseline, the best constant answer per position on the same "
    "instances (`baseline` in summary.csv): no seed above it by more than 0.01, or the CI's upper "
    "end not; seeds that disagree, with a CI too wide to decide, get no mark",
    "[k NaN]": "k seeds' values were NaN (a diverged run): left out of n and of the statistics, "
    "counted in `n_nan` of summary.csv",
}


def _fmt(value, metric: str) -> str:
    """– for None; 3 decimals for accuracy and exact match, 4 significant digits otherwise."""
    if value is None:
        return "–"
    return f"{value:.3f}" if metric in ("accuracy", "exact_match") else f"{value:.4g}"


def _cell(row: dict, statistic: str = "mean") -> str:
    """mean ± CI half-width (with ``statistic`` max or min: that value over seeds, "(max of
    n)"), or (n=1), or – without values; then the ``MARKS`` that apply; † where runs did not
    learn."""
    if row["n_seeds"] == 0:
        return f"– [{row['n_nan']} NaN]" if row.get("n_nan") else "–"
    metric, text = row["metric"], _fmt(row[statistic], row["metric"])
    if row["n_seeds"] == 1:
        text += " (n=1)"
    elif statistic == "mean":
        text += f" ± {_fmt(row['ci95_high'] - row['mean'], metric)}"
    else:
        text += f" ({statistic} of {row['n_seeds']})"
    text += "" if row["draw_std"] is None else f" [draws ±{_fmt(row['draw_std'], metric)}]"
    text += " ≤b" if row["above_baseline"] is False else ""
    text += f" [{row['n_nan']} NaN]" if row.get("n_nan") else ""
    return text + (" †" if row["n_not_learned"] else "")


def _md_table(header: list, body) -> list[str]:
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(str(c).replace("|", "\\|") for c in row) + " |" for row in body]
    return [*lines, ""]


def _panel(frame: pd.DataFrame) -> list[str]:
    """One results table: a line per configuration, a column per length."""
    train_len, lengths = frame["train_len"].iloc[0], sorted(set(frame["length"]))
    in_dist = set(frame.loc[frame["in_distribution"].astype(bool), "length"])
    header = ["pe", "settings", "n"]
    for length in lengths:
        note = f"{length / train_len:g}×" if train_len else ""
        note += ", in-dist" if length in in_dist else ""
        header.append(f"{length} ({note})" if note else str(length))
    body = []
    for (pe, settings, _), config in frame.groupby(
        ["pe", "settings", "config_hash"], sort=False, dropna=False
    ):
        cells = dict(zip(config["length"], config["cell"], strict=True))
        low, high = config["n_seeds"].min(), config["n_seeds"].max()
        n = str(low) if low == high else f"{low}–{high}"
        body.append([pe, settings or "–", n, *(cells.get(length, "") for length in lengths)])
    return _md_table(header, body)


def _not_learned_caveat(summary: Summary, hashes, where: str, mark: str = "†") -> list[str]:
    """The caveat each section repeats when it uses runs that did not learn in distribution."""
    if not (runs := [run for run in summary.not_learned if run.config_hash in set(hashes)]):
        return []
    how = "excluded from the statistics, counted in n_not_learned"
    how = how if summary.exclude_not_learned else "kept in the statistics"
    return [
        f"{mark} {len(runs)} run(s) {where} did not learn in distribution (accuracy at the "
        f"training length < {summary.min_accuracy:g}; {how}): {run_names(runs)}.",
        "",
    ]


def _settings_section(summary: Summary) -> list[str]:
    metric, excluded = summary.metric, len(summary.excluded)
    fallback = f" ({LM_FALLBACK_METRIC} on language-modelling rows, where {metric} is null)"
    no_criterion = sum(not run.criterion for run in summary.excluded)
    kept = "**kept** in the statistics and marked †"
    if summary.exclude_not_learned:
        kept = "**excluded** from the statistics (n counts the others)"
    lines = [
        "## Settings",
        "",
        f"- Metric: `{metric}`{fallback if METRIC_DIRECTIONS[metric] else ''}; "
        f"source files: `{results_name(summary.tag)}`.",
        *RULES.format(ignored=", ".join(f"`{k}`" for k in AVERAGED_MAY_DIFFER)).splitlines(),
        f"- Not learned: per-token accuracy at the training length < {summary.min_accuracy:g}. "
        f"Such runs are {kept}.",
        f"- Seeds: a configuration's runs over `seed` and `data.seed` (the training stream's "
        f"seed, listed as seed:data seed where it differs) are its replicates; tables show the "
        f"{STATISTIC_NAMES[summary.statistic]}"
        + (" ± 95% CI half-width" if summary.statistic == "mean" else "")
        + "; ρ_τ for τ = "
        + ", ".join(ratio_key(t) for t in summary.ratio_thresholds)
        + ".",
    ]
    if summary.reached_criterion:
        lines.append(
            "- `--reached-criterion`: only runs trained to a criterion that reached it are "
            f"aggregated; {excluded} run(s) excluded ({no_criterion} trained without a "
            f"criterion, {excluded - no_criterion} that did not reach it)."
        )
    lines.append(
        f"- Runs: {len(summary.runs)} found, {len(summary.aggregated)} aggregated, "
        f"{len(summary.failed)} failed or missing, {len(summary.duplicates)} duplicates not "
        f"counted, {len(summary.not_learned)} did not learn."
    )
    if summary.ignored_tag_files:
        lines.append(
            f"- {len(summary.ignored_tag_files)} re-evaluation file(s) (`results.<tag>.json`) "
            "not included; aggregate one tag with `--tag <tag>` (listed below)."
        )
    return [*lines, ""]


def _results_section(summary: Summary) -> list[str]:
    shown = "mean ± 95% CI half-width"
    shown = shown if summary.statistic == "mean" else STATISTIC_NAMES[summary.statistic]
    lines = [f"## Results ({summary.metric}: {shown})", ""]
    used = {
        "[draws ±s]": any(row["draw_std"] is not None for row in summary.rows),
        "≤b": any(row["above_baseline"] is False for row in summary.rows),
        "[k NaN]": bool(summary.nan_rows),
    }
    marks = [f"{mark}: {text}" for mark, text in MARKS.items() if used[mark]]
    lines += ["Marks: " + "; ".join(marks) + ".", ""] if marks else []
    if not summary.rows:
        return lines
    cells = [_cell(row, summary.statistic) for row in summary.rows]
    frame = pd.DataFrame(summary.rows, dtype=object).assign(cell=cells)
    for (task, model, train_len, protocol), panel in frame.groupby(TABLE, sort=False, dropna=False):
        metrics = ", ".join(sorted(set(panel["metric"])))
        lines += [f"### {task} · {model} · train_len {train_len} · {protocol} · {metrics}", ""]
        lines += [*_panel(panel), *_not_learned_caveat(summary, panel["_hash"], "in this table")]
    return lines


def _ratio_section(summary: Summary) -> list[str]:
    """ρ_τ over seeds: one table per task · model · training length · protocol."""
    if not summary.ratios:
        return []
    frame = pd.DataFrame(summary.ratios, dtype=object)
    metrics = sorted(set(frame["metric"]))
    relative = [m for m in metrics if not METRIC_DIRECTIONS[m]]
    score = " or ".join(f"`{m}`" for m in metrics if METRIC_DIRECTIONS[m])
    score += (" or " if score and relative else "") + " or ".join(
        f"`{m}` at the training length / `{m}`" for m in relative
    )
    longest = ", ".join(f"{value:g}×" for value in sorted(set(frame["longest_ratio"]) - {None}))
    lines = [RATIOS.format(score=score, longest=longest or "–")]
    for (task, model, train_len, protocol), panel in frame.groupby(TABLE, sort=False, dropna=False):
        lines += [f"### ρ_τ: {task} · {model} · train_len {train_len} · {protocol}", ""]
        body = [
            [
                row["pe"],
                row["settings"] or "–",
                ratio_key(row["tau"]),
                row["n_seeds"],
                _ratio_cell(row),
                *(_ratio_number(row[key]) for key in ("std", "min", "max")),
                f"{row['n_zero']} / {row['n_capped']}",
            ]
            for row in panel.to_dict("records")
        ]
        header = ["pe", "settings", "τ", "n", "mean ± CI", "sd", "min", "max"]
        lines += _md_table([*header, "ρ = 0 / ≥"], body)
        lines += _not_learned_caveat(summary, panel["_hash"], "in this table")
    return lines


def _ratio_number(value) -> str:
    return "–" if value is None else f"{value:.3g}"


def _ratio_cell(row: dict) -> str:
    """ρ's mean ± CI half-width, or (n=1), or – without runs."""
    if row["n_seeds"] == 0:
        return "–"
    if row["n_seeds"] == 1:
        return f"{_ratio_number(row['mean'])} (n=1)"
    return f"{_ratio_number(row['mean'])} ± {_ratio_number(row['ci95_high'] - row['mean'])}"


def _ranking_section(summary: Summary) -> list[str]:
    thresholds = ", ".join(ratio_key(t) for t in summary.ratio_thresholds)
    ratios = (
        f" ρ_τ (τ = {thresholds}): the mean over the configurations and protocols a PE was "
        f"ranked in of their ρ_τ ({STATISTIC_NAMES[summary.statistic]} over seeds)."
    )
    lines = [RANKING.format(statistic=STATISTIC_NAMES[summary.statistic], ratios=ratios)]
    ranked, where = summary.ranked, "in the ranked comparisons"
    if not summary.exclude_not_learned:  # otherwise the ranking uses none of them
        lines += _not_learned_caveat(summary, ranked.get("_hash", []), where, "Caveat:")
    unranked = {entry["task"] for entry in summary.left_out} - set(ranked.get("task", []))
    for task in sorted(unranked, key=str):
        lines += [f"No encoding learned {task} in distribution: nothing to rank.", ""]
    if not summary.ranking and not summary.left_out:
        lines += ["No comparison with two or more PEs beyond the training length.", ""]
    rho = [column for column in ranking_columns(summary.ratio_thresholds)[len(RANKING_COLUMNS) :]]
    ranking = pd.DataFrame(summary.ranking, columns=[*RANKING_COLUMNS, *rho])
    for scope, entries in ranking.groupby("scope", sort=False):
        lines += [f"### {'all tasks' if scope == 'all' else scope}", ""]
        entries = entries.assign(mrr=entries["mrr"].map("{:.3f}".format))
        entries = entries.assign(mean_rank=entries["mean_rank"].map("{:.2f}".format))
        entries = entries.assign(**{c: entries[c].map(_ratio_number) for c in rho})
        body = entries[["position", "pe", "mrr", "mean_rank", "n_comparisons", "n_best", *rho]]
        header = ["#", "pe", "MRR", "mean rank", "comparisons", "n_best"]
        lines += _md_table([*header, *(f"ρ_{c[len('rho_') :]}" for c in rho)], body.values)
    if summary.left_out:
        body = [[e[k] for k in (*TABLE, "n_comparisons", "reason")] for e in summary.left_out]
        lines += ["### Comparisons left out", ""]
        lines += _md_table([*TABLE, "comparisons", "reason"], body)
    return lines


def _run_list(runs: list, columns: dict[str, str]) -> list[str]:
    """``runs`` as a table (their runs.csv ``columns`` -> header), or "None."."""
    body = [
        [f"{record[key]:.3f}" if key == "id_accuracy" else record[key] for key in columns]
        for record in (run.record for run in runs)
    ]
    return _md_table(list(columns.values()), body) if body else ["None.", ""]


def format_markdown(summary: Summary) -> str:
    """The human-readable report: settings, tables of mean ± CI, ranking, flags, failures."""
    title = f"`{summary.folder}`"
    if len(summary.sources) > 1:  # sweeps compared: each under its label (settings: sweep=…)
        title = ", ".join(f"{label} = `{path}`" for label, path in summary.sources)
    lines = [f"# Results summary: {title}", "", *_settings_section(summary)]
    lines += verdict_section(summary.verdicts, summary.test_rule)  # before the numbers it qualifies
    lines += [*_results_section(summary), *_ratio_section(summary)]
    lines += [*paper_ratio_section(summary), *_ranking_section(summary)]  # the papers' units
    lines += [f"## Runs that did not learn in distribution (accuracy < {summary.min_accuracy:g})"]
    columns = {"run_dir": "run", **{key: key for key in DESCRIBED}}
    lines += [
        "",
        *_run_list(summary.not_learned, columns | {"id_accuracy": "accuracy at train_len"}),
    ]
    if unchecked := sum(run.learned is None for run in summary.aggregated):
        note = "Not checked (no accuracy at the training length, e.g. language modelling)"
        lines += [f"{note}: {unchecked} run(s).", ""]
    columns = {"run_dir": "run", "pe": "pe", "task": "task", "seed": "seed", "reason": "reason"}
    lines += ["## Failed or missing runs", "", *_run_list(summary.failed, columns)]
    if summary.duplicates:
        lines += ["## Duplicate runs (not counted)", ""]
        lines += _run_list(summary.duplicates, {"run_dir": "run", "reason": "reason"})
    if summary.ignored_tag_files:
        lines += ["## Re-evaluation files not included", ""]
        lines += [*(f"- `{name}`" for name in summary.ignored_tag_files), ""]
    return "\n".join(lines)


def format_extension(summary: Summary, rows: list[dict]) -> str:
    """extension.md: per task · model · training length · protocol, one line per trained
    configuration × length-extension method (``none``: its own evaluation), a column per
    length, cells as in summary.md."""
    shown = "mean ± 95% CI half-width"
    shown = shown if summary.statistic == "mean" else STATISTIC_NAMES[summary.statistic]
    lines = [
        f"# Length-extension methods: `{summary.folder}`",
        "",
        f"{summary.metric}, {shown} over seeds. `none`: each run's own evaluation "
        "(`results.json`); the others: its `eval.py` re-evaluations (`results.<tag>.json`), "
        "named by the overrides they applied. Same runs, same evaluation instances: paired.",
        "",
    ]
    cells = [_cell(row, summary.statistic) for row in rows]
    frame = pd.DataFrame(rows, dtype=object).assign(cell=cells)
    frame = frame.assign(pe=[f"{pe} · {method}" for pe, method in
                             zip(frame["pe"], frame["method"], strict=True)],
                         config_hash=frame["base_hash"] + frame["method"])  # fmt: skip
    for (task, model, train_len, protocol), panel in frame.groupby(TABLE, sort=False, dropna=False):
        lines += [f"## {task} · {model} · train_len {train_len} · {protocol}", ""]
        lines += _panel(panel)
    return "\n".join(lines)
