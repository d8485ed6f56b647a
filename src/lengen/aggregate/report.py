"""Writing an aggregated sweep: summary.csv / .md, ratios.csv, ranking.csv, failed.csv, runs.csv
(named by tag, metric and statistic), the probe of the output folder and the warnings. Nothing
is computed here (see .stats); summary.md's text is .markdown's, the command line .command's."""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from lengen.aggregate.extension import EXTENSION_COLUMNS, extension_rows
from lengen.aggregate.literature import PAPER_RATIO_COLUMNS, paper_ratio_rows
from lengen.aggregate.load import DESCRIBED
from lengen.aggregate.markdown import format_extension, format_markdown, run_names
from lengen.aggregate.ranking import ranking_columns
from lengen.aggregate.stats import (
    RATIO_COLUMNS,
    SUMMARY_COLUMNS,
    Summary,
    aggregate,
)
from lengen.aggregate.verdicts import verdicts_json
from lengen.atomic import atomic_write
from lengen.results import CONFIG_NAME, HEADLINE_METRIC

RUN_COLUMNS = ("run_dir", "status", "reason", "config_hash", *DESCRIBED, "data_seed")
RUN_COLUMNS += ("id_accuracy",)
RUN_COLUMNS += ("criterion_reached", "reached_at_step")
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


def csv_tables(summary: Summary, extension: list[dict] | None = None) -> dict[str, tuple]:
    """Each CSV output's (rows, columns), the one place their columns are chosen: summary.csv,
    ratios.csv, ranking.csv (the ranking, then the comparisons left out), failed.csv, runs.csv
    and, with ``extension`` rows, extension.csv."""
    tables = {
        "summary.csv": (summary.rows, SUMMARY_COLUMNS),
        "ratios.csv": (summary.ratios, RATIO_COLUMNS),
        "ranking.csv": (
            summary.ranking + summary.left_out,
            ranking_columns(summary.ratio_thresholds),
        ),
        "failed.csv": ([run.record for run in summary.failed], RUN_COLUMNS),
        "runs.csv": ([run.record for run in summary.runs], RUN_COLUMNS),
        "verdicts.json": verdicts_json(summary.verdicts, summary.test_rule),  # a test or not
    }
    if extension:
        tables["extension.csv"] = (extension, EXTENSION_COLUMNS)
    if paper := paper_ratio_rows(summary):  # only where a paper's definition is known
        tables["paper_ratios.csv"] = (paper, PAPER_RATIO_COLUMNS)
    return tables


def data_frames(summary: Summary, extension: list[dict] | None = None) -> dict[str, pd.DataFrame]:
    """:func:`csv_tables` as pandas DataFrames keyed by the file's stem (``summary``,
    ``ratios``, ``ranking``, ``failed``, ``runs``, ``extension``), each with its CSV's columns
    in order (missing values NaN/None): the notebook form of every table aggregate.py writes."""
    return {
        name.removesuffix(".csv"): pd.DataFrame(
            [{key: row.get(key) for key in columns} for row in rows], columns=list(columns)
        )
        for name, (rows, columns) in _csv_only(csv_tables(summary, extension))
    }


def _csv_only(tables: dict) -> list[tuple[str, tuple]]:
    """The (name, (rows, columns)) of the CSV files among ``tables`` (others are text)."""
    return [(name, table) for name, table in tables.items() if name.endswith(".csv")]


def load_tables(folder: str | Path | list, **options) -> dict[str, pd.DataFrame]:
    """Every table ``scripts/aggregate.py`` writes for ``folder``, as pandas DataFrames with the
    CSV files' columns (:func:`data_frames`): ``summary``, ``ratios``, ``ranking`` (the
    ranking, then the comparisons left out), ``failed``, ``runs`` and, where runs carry
    re-evaluations, ``extension``. ``options`` are :func:`aggregate`'s (``metric=``, ``tag=``…)."""
    summary = aggregate(folder, **options)
    return data_frames(summary, extension_rows(summary))


def write_outputs(
    summary: Summary, out_dir: str | Path | None = None, extension: list[dict] | None = None
) -> list[Path]:
    """summary.csv, summary.md, ratios.csv, ranking.csv, failed.csv and runs.csv, and with
    ``extension`` rows (``lengen.aggregate.extension``) extension.csv and extension.md, named by
    :func:`output_name` (tag, metric, statistic), written atomically; returns the paths. In the
    CSV files None is an empty field and numbers have full precision."""
    csv = csv_tables(summary, extension)
    tables: dict = {"summary.csv": csv["summary.csv"], "summary.md": format_markdown(summary)}
    tables |= csv  # summary.csv keeps its first place: the files in the order they always had
    if extension:
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


def failed_names(runs, limit: int) -> str:
    """The first ``limit`` failed runs, each with its reason's first line (cut at 120
    characters): plot.py writes no failed.csv, so its warning is where the user reads which
    part of a run is damaged (PL05b)."""
    runs, shown = list(runs), []
    for run in runs[:limit]:
        reason = next(iter((run.reason or "").strip().splitlines()), "?")
        shown.append(f"{run.name} ({reason[:119] + '…' if len(reason) > 120 else reason})")
    return ", ".join(shown) + (" …" if len(runs) > limit else "")


#: the outputs of ``write_outputs`` that list the failed runs (their names before options)
FAILED_LISTS = ("summary.md", "failed.csv")


def failed_lists(summary: Summary, written) -> list[Path]:
    """Of the paths ``written`` (``write_outputs``'), those that list the failed runs: what
    aggregate.py's failed-runs warning names (plot.py writes neither)."""
    options = (summary.tag, summary.metric, summary.statistic)
    names = {output_name(name, *options) for name in FAILED_LISTS}
    return [Path(path) for path in written if Path(path).name in names]


def warnings_for(summary: Summary, listed_in=()) -> list[str]:
    """One line per problem a user must see (printed on stderr by the CLI). ``listed_in``: the
    files the caller wrote that list the failed runs (``failed_lists``), named in their line;
    none (plot.py) leaves the line to the runs' names and reasons."""
    failed, not_learned, duplicates = summary.failed, summary.not_learned, summary.duplicates
    verb = "excluded" if summary.exclude_not_learned else "kept in the statistics, flagged"
    where = " and ".join(Path(path).name for path in listed_in)
    lines = {  # line -> whether it applies
        f"no run directories (holding {CONFIG_NAME}) below {summary.folder}": not summary.runs,
        f"{len(failed)} failed or missing run(s){f', listed in {where}' if where else ''}: "
        + failed_names(failed, 5): failed,
        f"{len(duplicates)} duplicate run(s) (same config and seed) not counted": duplicates,
        f"{len(summary.excluded)} run(s) excluded by --reached-criterion": summary.excluded,
        f"{len(not_learned)} run(s) did not learn in distribution ({verb}): "
        + run_names(not_learned, 5): not_learned,
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
