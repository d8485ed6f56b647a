"""Writing an aggregated sweep: summary.csv / .md, ratios.csv, ranking.csv, failed.csv, runs.csv,
warnings, and the command line behind ``scripts/aggregate.py``. Nothing is computed here (see
.stats)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import pandas as pd

from lengen.aggregate.extension import EXTENSION_COLUMNS, extension_rows
from lengen.aggregate.load import DESCRIBED
from lengen.aggregate.stats import (
    RANKING_COLUMNS,
    RATIO_COLUMNS,
    STATISTICS,
    SUMMARY_COLUMNS,
    TABLE,
    Summary,
    aggregate,
    ranking_columns,
)
from lengen.atomic import atomic_write
from lengen.identity import AVERAGED_MAY_DIFFER
from lengen.results import (
    CONFIG_NAME,
    HEADLINE_METRIC,
    LEARNED_ACCURACY,
    LM_FALLBACK_METRIC,
    METRIC_DIRECTIONS,
    RATIO_THRESHOLDS,
    ratio_key,
    results_name,
)

RUN_COLUMNS = ("run_dir", "status", "reason", "config_hash", *DESCRIBED, "data_seed")
RUN_COLUMNS += ("id_accuracy",)
RUN_COLUMNS += ("criterion_reached", "reached_at_step")
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
    "instances (`baseline` in summary.csv): the mean with n=1, the CI's lower end with n ≥ 2",
    "[k NaN]": "k seeds' values were NaN (a diverged run): left out of n and of the statistics, "
    "counted in `n_nan` of summary.csv",
}


#: the metric whose outputs keep the plain names (summary.csv, summary.md, ranking.csv,
#: ratios.csv): the headline, the default of ``--metric``
PLAIN_METRIC = HEADLINE_METRIC
#: outputs whose content depends on ``--metric`` / on ``--statistic``: their names carry it
#: where it is not the default, so one folder holds every metric's tables side by side
BY_METRIC = ("summary.csv", "summary.md", "ratios.csv", "ranking.csv", "extension.csv")
BY_METRIC += ("extension.md",)
BY_STATISTIC = (
    "summary.md",
    "ranking.csv",
    "extension.md",
)  # summary.csv and ratios.csv hold every statistic


def output_name(name: str, tag: str | None, metric: str, statistic: str = "mean") -> str:
    """``summary.csv`` -> the file's name for these options: ``.<tag>``, then ``.<metric>``
    unless the metric is the headline (exact match), then ``.<statistic>`` unless the mean, each
    before the extension: ``summary.yarn3.accuracy.csv``, ``summary.max.md``. The figures of
    ``plot.py --metric M`` hold the numbers of ``output_name("summary.csv", tag, M)``."""
    stem, extension = name.rsplit(".", 1)
    parts = [stem, *([tag] if tag else [])]
    parts += [metric] if name in BY_METRIC and metric != PLAIN_METRIC else []
    parts += [statistic] if name in BY_STATISTIC and statistic != "mean" else []
    return ".".join([*parts, extension])


def write_outputs(
    summary: Summary, out_dir: str | Path | None = None, extension: list[dict] | None = None
) -> list[Path]:
    """summary.csv, summary.md, ratios.csv, ranking.csv, failed.csv and runs.csv, and with
    ``extension`` rows (``lengen.aggregate.extension``) extension.csv and extension.md, named by
    :func:`output_name` (tag, metric, statistic), written atomically; returns the paths. In the
    CSV files None is an empty field and numbers have full precision."""
    tables = {
        "summary.csv": (summary.rows, SUMMARY_COLUMNS),
        "summary.md": format_markdown(summary),
        "ratios.csv": (summary.ratios, RATIO_COLUMNS),
        "ranking.csv": (
            summary.ranking + summary.left_out,
            ranking_columns(summary.ratio_thresholds),
        ),
        "failed.csv": ([run.record for run in summary.failed], RUN_COLUMNS),
        "runs.csv": ([run.record for run in summary.runs], RUN_COLUMNS),
    }
    if extension:
        tables["extension.csv"] = (extension, EXTENSION_COLUMNS)
        tables["extension.md"] = format_extension(summary, extension)
    paths = []
    for name, table in tables.items():
        if isinstance(table, tuple):
            rows, columns = table
            cells = [{k: "" if row.get(k) is None else row[k] for k in columns} for row in rows]
            frame = pd.DataFrame(cells, columns=list(columns), dtype=object)
            table = frame.to_csv(index=False, lineterminator="\n", na_rep="nan")
        name = output_name(name, summary.tag, summary.metric, summary.statistic)
        paths.append(Path(out_dir or summary.folder) / name)
        atomic_write(paths[-1], table)
    return paths


def unwritable(out_dir: str | Path) -> str | None:
    """Why the outputs cannot go into ``out_dir``, as the line aggregate.py and plot.py print
    before exiting 2 with nothing written; None where they can. Checked by writing and removing
    a probe file in it or, where it does not exist yet, in the nearest folder above it (which
    makes nothing): root ignores permission bits, a read-only mount it does not."""
    import tempfile

    out_dir = Path(out_dir)
    existing = next((p for p in (out_dir, *out_dir.absolute().parents) if p.exists()), None)
    if existing is None:
        return None
    if not existing.is_dir():
        where = "is a file" if existing == out_dir else f"cannot be made: {existing} is a file"
        return f"{out_dir} {where}; write the outputs elsewhere with --out DIR"
    try:
        with tempfile.NamedTemporaryFile(dir=existing, prefix=".lengen-probe."):
            pass
    except OSError as error:
        reason = error.strerror or type(error).__name__
        where = (
            "is not writable"
            if existing == out_dir
            else f"cannot be made: {existing} is not writable"
        )
        return f"{out_dir} {where} ({reason}); write the outputs elsewhere with --out DIR"
    return None


def write_failure(out_dir: str | Path, error: OSError) -> str:
    """The line for an output that could not be written after the folder passed
    :func:`unwritable` (exit 4): each file is written atomically, so every file is whole, the
    new one or the one before."""
    reason = error.strerror or type(error).__name__
    return (
        f"writing into {out_dir} failed ({reason}); each file there is whole (old or new): "
        "free the space or write elsewhere with --out DIR, and run again"
    )


def _names(runs, limit: int | None = None) -> str:
    names = [run.name for run in runs]
    return ", ".join(names[:limit]) + (" …" if limit and len(names) > limit else "")


def warnings_for(summary: Summary) -> list[str]:
    """One line per problem a user must see (printed on stderr by the CLI)."""
    failed, not_learned, duplicates = summary.failed, summary.not_learned, summary.duplicates
    verb = "excluded" if summary.exclude_not_learned else "kept in the statistics, flagged"
    lines = {  # line -> whether it applies
        f"no run directories (holding {CONFIG_NAME}) below {summary.folder}": not summary.runs,
        f"{len(failed)} failed or missing run(s), listed in summary.md and failed.csv: "
        + _names(failed, 5): failed,
        f"{len(duplicates)} duplicate run(s) (same config and seed) not counted": duplicates,
        f"{len(summary.excluded)} run(s) excluded by --reached-criterion": summary.excluded,
        f"{len(not_learned)} run(s) did not learn in distribution ({verb}): "
        + _names(not_learned, 5): not_learned,
    }
    if nan_rows := summary.nan_rows:
        runs = sorted({name for row in nan_rows for name in row["_nan_runs"]})
        lines[
            f"{sum(row['n_nan'] for row in nan_rows)} NaN value(s) of {summary.metric} in "
            f"{len(runs)} run(s), left out of the statistics and counted in n_nan "
            f"(summary.csv, [k NaN] in summary.md): "
            + ", ".join(runs[:5])
            + (" …" if len(runs) > 5 else "")
        ] = True
    return [line for line, applies in lines.items() if applies] + [
        f"ranking: {entry['n_comparisons']} comparison(s) of {entry['task']} · {entry['model']} · "
        f"train_len {entry['train_len']} · {entry['protocol']} left out: {entry['reason']}"
        for entry in summary.left_out
    ]


# -- summary.md --------------------------------------------------------------------------------
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
        f"training length < {summary.min_accuracy:g}; {how}): {_names(runs)}.",
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
    lines += [*_results_section(summary), *_ratio_section(summary), *_ranking_section(summary)]
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


# -- command line ------------------------------------------------------------------------------
#: the options aggregate.py and plot.py share (which metric, runs and result files) -> argparse
SELECTION = {
    "--metric": dict(default="exact_match", choices=list(METRIC_DIRECTIONS)),
    "--min-accuracy": dict(type=float, default=LEARNED_ACCURACY),
    "--exclude-not-learned": dict(action="store_true"),
    "--reached-criterion": dict(action="store_true"),
    "--tag": dict(default=None),
}
HELP = {
    "--metric": "metric to summarise (default exact_match: the whole answer right, what the "
    "papers compare; accuracy: per-token accuracy; ppl stands in on language-modelling rows, "
    "where accuracy / exact_match are null)",
    "--min-accuracy": "flag runs whose per-token accuracy at the training length is below this "
    f"(default {LEARNED_ACCURACY}); comparisons in which no run of any PE reaches it are not "
    "ranked",
    "--exclude-not-learned": "leave flagged runs out of the statistics (default: keep and flag "
    "them)",
    "--reached-criterion": "aggregate only runs trained to a criterion "
    "(trainer.criterion_target) that reached it; the others are counted in summary.md",
    "--tag": "aggregate the re-evaluations results.<tag>.json instead of results.json (outputs "
    "get .<tag> before their extension)",
}


def add_selection_arguments(parser) -> None:
    """The options aggregate.py and plot.py share (``SELECTION``)."""
    for flag, options in SELECTION.items():
        parser.add_argument(flag, help=HELP[flag], **options)


#: aggregate.py's own options (what its tables report), beside ``SELECTION``
REPORTING = {
    "--statistic": dict(default="mean", choices=list(STATISTICS)),
    "--ratio-thresholds": dict(type=float, nargs="+", default=list(RATIO_THRESHOLDS)),
}
HELP |= {
    "--statistic": "what the tables show and the ranking ranks by, over seeds: mean (± 95%% CI, "
    "the default) or max / min, the statistic of papers that report the best seed (e.g. the "
    "Chomsky-hierarchy benchmarks: max over seeds)",
    "--ratio-thresholds": "the τ of the length-generalisation ratio ρ_τ, numbers in (0, 1] "
    "(default 0.9 0.5)",
}


def summary_from_arguments(args) -> Summary | None:
    """Aggregate ``args.folder`` (one folder, or several to compare: ``[LABEL=]FOLDER``) as
    the options say (``SELECTION``, and ``REPORTING`` where the parser has them); None (message
    printed) on bad input."""
    flags = [*SELECTION, *(flag for flag in REPORTING if hasattr(args, _dest(flag)))]
    options = {_dest(flag) for flag in flags}
    if args.tag is not None and not _plain_name(args.tag):  # it becomes part of file names
        print(f"error: --tag {args.tag!r}: allowed: a tag as eval.py names them (letters, "
              "digits, '-', '_' and '.')", file=sys.stderr)  # fmt: skip
        return None
    if args.tag in METRIC_DIRECTIONS:  # summary.<tag>.csv would be another metric's file
        print(f"error: --tag {args.tag} is a metric's name; tags that name a metric are not "
              "aggregated (output names carry the metric)", file=sys.stderr)  # fmt: skip
        return None
    try:
        folders = sweep_arguments(args.folder)
        if len(folders) > 1 and getattr(args, "out", None) is None:
            raise ValueError("several folders are compared into a folder of their own: --out DIR")
        return aggregate(folders, **{name: getattr(args, name) for name in options})
    except (ValueError, FileNotFoundError) as error:
        print(f"error: {error}", file=sys.stderr)
        return None


def _plain_name(tag: str) -> bool:
    """eval.py's rule for a tag (``lengen.reeval.check_tag``): ``../x`` would write outside
    the folder, ``a/b`` into folders of its own."""
    return tag.replace("-", "").replace("_", "").replace(".", "").isalnum()


def no_runs(summary: Summary) -> str | None:
    """The refusal of a folder holding no run directory at all (a wrong path, most likely):
    nothing to summarise, so nothing is written into it; None where runs were found."""
    if summary.runs:
        return None
    folders = ", ".join(str(path) for _, path in summary.sources) or str(summary.folder)
    return (
        f"{folders}: no run directories (holding {CONFIG_NAME}) below it; allowed: a sweep "
        "folder or run directory of lengen (results/multiruns/…, results/runs/…)"
    )


class OneLineParser(argparse.ArgumentParser):
    """argparse whose refusals are one line, ``error: …`` as the rest of lengen's (argparse
    prints its whole usage first), exit 2; ``--help`` is unchanged."""

    def error(self, message: str):
        self.exit(2, f"error: {self.prog}: {message} (see {self.prog} --help)\n")


def sweep_arguments(values) -> list:
    """The command line's folders: ``FOLDER`` or ``LABEL=FOLDER`` (a comparison's label) ->
    what ``aggregate`` takes (one path, or a list of (label, path))."""
    values = [str(value) for value in (values if isinstance(values, list) else [values])]
    pairs = []
    for value in values:
        label, _, path = value.partition("=")
        if path and not Path(value).exists():
            pairs.append((label, Path(path)))
        else:
            pairs.append((None, Path(value)))
    return [pairs[0][1]] if len(pairs) == 1 and pairs[0][0] is None else pairs


def _dest(flag: str) -> str:
    return flag[2:].replace("-", "_")


def main(argv: list[str] | None = None) -> int:
    """The CLI behind scripts/aggregate.py: 0 done (failed runs are listed, not errors), 2 bad
    input or an output folder that cannot be written (nothing written), 4 writing failed on the
    way (a full disk)."""
    parser = OneLineParser(
        prog="aggregate.py",
        description="Summarise a sweep folder: summary.csv, summary.md, ratios.csv, ranking.csv, "
        "failed.csv, runs.csv (mean ± 95% CI over seeds; with --metric other than exact_match "
        "summary.<metric>.csv, …). Several folders ([LABEL=]FOLDER …, with --out): the sweeps "
        "compared, each a setting sweep=LABEL. See docs/analysis.md.",
    )
    parser.add_argument(
        "folder", nargs="+", help="a sweep folder (searched recursively); several: [LABEL=]FOLDER"
    )
    add_selection_arguments(parser)
    for flag, options in REPORTING.items():
        parser.add_argument(flag, help=HELP[flag], **options)
    parser.add_argument(
        "--out", type=Path, default=None, help="write the outputs here (default: the folder)"
    )
    args = parser.parse_args(argv)
    summary = summary_from_arguments(args)
    if summary is None:
        return 2
    if problem := no_runs(summary) or unwritable(out_dir := args.out or summary.folder):
        print(f"error: {problem}", file=sys.stderr)
        return 2
    try:
        paths = write_outputs(summary, out_dir, extension_rows(summary))
    except OSError as error:  # after the probe: a disk that filled up, a folder made read-only
        print(f"error: {write_failure(out_dir, error)}", file=sys.stderr)
        return 4
    for line in warnings_for(summary):
        print(f"warning: {line}", file=sys.stderr)
    configurations = len({row["_hash"] for row in summary.rows})
    print(
        f"{len(summary.aggregated)} run(s) in {configurations} configuration(s) -> "
        + ", ".join(map(str, paths))
    )
    return 0
