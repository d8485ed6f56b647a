"""Grouping and statistics of a sweep (pandas, scipy.stats): mean, std, 95% CI, best of seeds,
baseline and position-draw spread per configuration × length × protocol, settings, MRR ranking
(rules in the package docstring)."""

from __future__ import annotations

import json
import math
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd
import scipy.stats

from lengen.aggregate.load import IGNORED_KEYS, Run, config_hash, identity, load_runs
from lengen.results import (
    LEARNED_ACCURACY,
    LM_FALLBACK_METRIC,
    METRIC_DIRECTIONS,
    result_tags,
    results_name,
)

#: columns shown by name; the other keys that distinguish configurations go into ``settings``
NAMED_KEYS = ("pe.name", "data.name", "model.name", "data.len")
CI_LEVEL = 0.95
#: Config subtrees that belong to one named component (key prefix -> the key naming it): their
#: keys are compared among configurations of the same component, so a RoPE row is not labelled
#: with keys ALiBi lacks, nor a copy row with addition's ``data.task.base``.
COMPONENTS = {"pe.": "pe.name", "data.task.": "data.name"}
#: metrics with a trivial baseline in results rows (``baseline_<metric>``)
BASELINE_METRICS = ("accuracy", "exact_match")
SUMMARY_COLUMNS = (
    *("config_hash", "pe", "task", "model", "train_len", "settings", "protocol", "length"),
    *("in_distribution", "metric", "n_seeds", "seeds", "mean", "std", "ci95_low", "ci95_high"),
    *("best_of_seeds", "n_not_learned", "n_examples", "chance_accuracy", "baseline"),
    *("above_baseline", "draw_std", "position_draws"),
)
RANKING_COLUMNS = ("scope", "position", "pe", "mrr", "mean_rank", "n_comparisons", "n_best")
RANKING_COLUMNS += ("task", "model", "train_len", "protocol", "reason")  # left-out comparisons
CELL = ["hash", "length", "protocol"]  # one summary row each
TABLE = ["task", "model", "train_len", "protocol"]  # one table of summary.md each
COMPARISON = ["task", "_rank_hash", "length", "protocol", "metric"]  # one ranking each
NEEDS = {"mean": 1, "std": 2, "ci95_low": 2, "ci95_high": 2, "best_of_seeds": 1}  # least n


@dataclass
class Summary:
    """Everything the reports and figures need."""

    folder: Path
    metric: str
    min_accuracy: float
    exclude_not_learned: bool
    tag: str | None
    runs: list[Run]
    reached_criterion: bool = False
    rows: list[dict] = field(default_factory=list)
    ranking: list[dict] = field(default_factory=list)
    left_out: list[dict] = field(default_factory=list)  # comparisons no encoding learned
    ignored_tag_files: list[str] = field(default_factory=list)

    def _with(self, status: str) -> list[Run]:
        return [run for run in self.runs if run.status == status]

    failed = property(lambda self: self._with("failed"))
    duplicates = property(lambda self: self._with("duplicate"))
    excluded = property(lambda self: self._with("excluded"))  # --reached-criterion
    aggregated = property(lambda self: self._with("ok"))
    not_learned = property(lambda self: [r for r in self.aggregated if r.learned is False])

    @property
    def table(self) -> pd.DataFrame:
        """``rows`` as a DataFrame with the summary.csv columns."""
        return pd.DataFrame(self.rows, columns=list(SUMMARY_COLUMNS))


def aggregate(
    folder: str | Path,
    *,
    metric: str = "exact_match",
    min_accuracy: float = LEARNED_ACCURACY,
    exclude_not_learned: bool = False,
    tag: str | None = None,
    reached_criterion: bool = False,
) -> Summary:
    """Find, load, group and summarise every run below ``folder`` (rules: package docstring)."""
    if metric not in METRIC_DIRECTIONS:
        raise ValueError(f"metric must be one of {', '.join(METRIC_DIRECTIONS)}; got {metric!r}")
    if not 0.0 <= min_accuracy <= 1.0:
        raise ValueError(f"min_accuracy must be in [0, 1], got {min_accuracy}")
    folder = Path(folder)
    if not folder.is_dir():
        raise FileNotFoundError(f"{folder}: not a directory")
    runs = load_runs(folder, tag, min_accuracy, reached_criterion)
    args = (folder, metric, min_accuracy, exclude_not_learned, tag, runs, reached_criterion)
    summary = Summary(*args)
    if tag is None:
        summary.ignored_tag_files = [
            f"{run.name}/{results_name(t)}" for run in runs for t in result_tags(run.path)
        ]
    summary.rows = summary_rows(summary)
    summary.ranking = rank_pes(summary.rows)
    summary.left_out = left_out_comparisons(summary.rows)
    return summary


def row_metric(row: dict, metric: str) -> str | None:
    """The metric a results row is summarised by: ``metric``, or ppl on language-modelling rows
    when a task metric (accuracy, exact match) was asked for and is null there."""
    if row.get(metric) is not None:
        return metric
    if METRIC_DIRECTIONS.get(metric) and row.get(LM_FALLBACK_METRIC) is not None:
        return LM_FALLBACK_METRIC
    return None


def _fmean(values: pd.Series):
    """Correctly rounded mean of the non-null values; None without any."""
    values = values.dropna()
    return math.fsum(values) / len(values) if len(values) else None


def seed_statistics(used: pd.DataFrame) -> pd.DataFrame:
    """Per ``CELL`` group of ``used`` (one row per run, sorted by seed, with ``value`` and
    ``higher_is_better``): n, seeds, mean, std (ddof = 1), the 95% t-interval and the best
    value; std and CI are NaN where n < 2."""
    groups = used.groupby(CELL, sort=False, dropna=False)
    values = groups["value"]
    n = values.size()
    table = pd.DataFrame({"n": n, "seeds": groups["seed"].agg(lambda s: " ".join(map(str, s)))})
    table["mean"] = values.agg(math.fsum) / n
    deviations = (used["value"] - values.transform(math.fsum) / values.transform("size")) ** 2
    squares = deviations.groupby([used[key] for key in CELL], sort=False, dropna=False)
    table["std"] = np.sqrt(squares.agg(math.fsum) / (n - 1)).where(n >= 2)
    t_quantile = scipy.stats.t.ppf(0.5 + CI_LEVEL / 2, (n - 1).where(n >= 2))
    half_width = t_quantile * table["std"] / np.sqrt(n)
    table["ci95_low"], table["ci95_high"] = table["mean"] - half_width, table["mean"] + half_width
    table["best_of_seeds"] = values.max().where(groups["higher_is_better"].first(), values.min())
    return table


def summary_rows(summary: Summary) -> list[dict]:
    """One dict per configuration × length × protocol (``SUMMARY_COLUMNS`` and private ``_``
    keys for ranking and plots), sorted by task, model, train_len, protocol, pe, settings,
    length."""
    cells = pd.DataFrame.from_records(
        [
            {"hash": run.config_hash, "length": row["length"], "protocol": row["protocol"]}
            | {"run": run, "row": row, "seed": run.results["seed"], "learned": run.learned}
            | {"metric": row_metric(row, summary.metric)}
            for run in summary.aggregated
            for row in run.results["eval"]
        ],
        columns=[*CELL, "run", "row", "seed", "learned", "metric"],
    )
    # a cell's metric: the first one its rows hold (ppl for language modelling)
    first_metric = cells.groupby(CELL, sort=False, dropna=False)["metric"].transform("first")
    cells["metric"] = first_metric.fillna(summary.metric)
    cells["higher_is_better"] = cells["metric"].map(METRIC_DIRECTIONS).astype(bool)

    def pick(template: str) -> pd.Series:  # object column: None stays None, NaN stays NaN
        pairs = zip(cells["row"], cells["metric"], strict=True)
        return pd.Series([row.get(template.format(m)) for row, m in pairs], cells.index, object)

    has_baseline = cells["metric"].isin(BASELINE_METRICS)
    cells = cells.assign(value=pick("{}"), draw_std=pick("{}_draw_std"))
    cells["baseline"] = pick("baseline_{}").where(has_baseline, None)
    # a null value is no sample (a NaN is, as before: it makes the mean NaN)
    cells["counted"] = np.array([v is not None for v in cells["value"]], dtype=bool) & ~(
        summary.exclude_not_learned & cells["learned"].eq(False)
    )
    used = cells[cells["counted"]].sort_values("seed", kind="stable")
    table = seed_statistics(used.astype({"value": float}))
    settings = settings_by_hash(summary.aggregated)
    pe_settings = _distinguishing(_identities(summary.aggregated))
    out = []
    for key, group in cells.groupby(CELL, sort=False, dropna=False):
        (digest, length, protocol), run = key, group["run"].iloc[0]
        stat = table.loc[key] if key in table.index else {"n": 0, "seeds": ""}
        n, rows, mine = int(stat["n"]), list(group["row"]), group[group["counted"]]
        chances = {row.get("chance_accuracy") for row in rows} - {None}
        draws = {row.get("position_draws") for row in mine["row"]} - {None}
        baseline = _fmean(mine["baseline"])
        out.append(
            {
                "config_hash": digest[:10],
                **{name: run.results[name] for name in ("pe", "task", "model", "train_len")},
                "settings": join_settings(settings[digest]),
                "protocol": protocol,
                "length": length,
                "in_distribution": bool(rows[0].get("in_distribution")),
                "metric": group["metric"].iloc[0],
                "n_seeds": n,
                "seeds": stat["seeds"],
                **{k: float(stat[k]) if n >= NEEDS[k] else None for k in NEEDS},
                "n_not_learned": int(group["learned"].eq(False).sum()),
                "n_examples": min((row["n_examples"] for row in rows), default=None),
                "chance_accuracy": chances.pop() if len(chances) == 1 else None,
                "baseline": baseline,
                "above_baseline": None if baseline is None else _above(stat, baseline),
                "draw_std": _fmean(mine["draw_std"]),
                "position_draws": min(draws, default=None),
                "_hash": digest,
                "_pe_settings": join_settings(
                    [p for p in pe_settings[digest] if p[0].startswith("pe.")]
                ),
                "_n_learned": int(group["learned"].eq(True).sum()),
                "_n_unchecked": int(group["learned"].isna().sum()),
                "_language_modelling": all(row.get("accuracy") is None for row in rows),
                "_rank_hash": config_hash(run.config, (*IGNORED_KEYS, "pe")),
            }
        )
    named = ("task", "model", "pe")
    order = ("task", "model", "train_len", "protocol", "pe", "settings", "length")
    return sorted(out, key=lambda r: tuple(str(r[k]) if k in named else r[k] for k in order))


def _above(stat, baseline: float) -> bool:
    """Above the trivial baseline: the mean with one seed, the CI's lower end with several."""
    return bool((stat["mean"] if stat["n"] < 2 else stat["ci95_low"]) > baseline)


# -- settings: the keys that set configurations apart -----------------------------------------
def _component(key: str) -> str | None:
    return next((prefix for prefix in COMPONENTS if key.startswith(prefix)), None)


def _identities(runs: list[Run]) -> dict[str, dict]:
    """{configuration hash: identity} of the first run of each configuration."""
    configs = {}
    for run in runs:
        if run.config_hash is not None and run.config_hash not in configs:
            configs[run.config_hash] = identity(run.config)
    return configs


def settings_by_hash(runs: list[Run]) -> dict[str, list[tuple[str, str]]]:
    """For each configuration, the (key, value) pairs that set it apart within its table (the
    configurations of one task, model and training length; :func:`_distinguishing`). Keys null
    or absent in every configuration of a table never show (text-only keys on task rows)."""
    tables = defaultdict(dict)
    for digest, flat in _identities(runs).items():
        tables[json.dumps([flat.get(key) for key in NAMED_KEYS[1:]])][digest] = flat
    return {digest: pairs for t in tables.values() for digest, pairs in _distinguishing(t).items()}


def _distinguishing(configs: dict[str, dict]) -> dict[str, list[tuple[str, str]]]:
    """The (key, value) pairs, sorted by key, that set each of ``configs`` apart.

    A key counts when it takes two values (absent being one) among them, except the keys of
    one component only (``pe.base`` of RoPE, ``data.task.base`` of addition; ``COMPONENTS``):
    those count when they vary among configurations of that component, so RoPE rows are not
    labelled with keys ALiBi lacks. Options every PE has (``pe.randomized``) count like any
    other key. The named columns (pe, task, model, train_len) are left out."""
    values = {d: {k: json.dumps(v, default=str) for k, v in f.items()} for d, f in configs.items()}
    frame = pd.DataFrame.from_dict(values, orient="index").fillna("absent")
    prefixes = {key: _component(key) for key in frame}
    own = [  # a component's class follows its name; its other keys count for all when all have them
        key
        for key, prefix in prefixes.items()
        if prefix
        and (
            (frame[key] == "absent").any() or key.removeprefix(prefix) in ("_target_", "_partial_")
        )
    ]
    shown = pd.DataFrame(True, frame.index, frame.columns) & (frame.nunique() > 1)
    for prefix, name_key in COMPONENTS.items():
        keys = [key for key in own if prefixes[key] == prefix]
        names = frame.get(name_key, pd.Series("absent", frame.index))
        shown[keys] = frame[keys].groupby(names).transform("nunique") > 1
    return {
        digest: [
            (key, _show(configs[digest].get(key, "null")))
            for key in sorted(frame)
            if shown.at[digest, key] and key not in NAMED_KEYS
        ]
        for digest in frame.index
    }


def join_settings(pairs: list[tuple[str, str]]) -> str:
    return ", ".join(f"{key}={value}" for key, value in pairs)


def _show(value) -> str:
    return value if isinstance(value, str) else json.dumps(value, separators=(",", ":"))


# -- ranking -----------------------------------------------------------------------------------
def average_ranks(values: list[float], higher_is_better: bool = True) -> list[float]:
    """Rank 1 = best; equal values (up to float noise: 12 significant digits) share the mean
    of the ranks they span (``scipy.stats.rankdata``); NaN ranks last."""
    rounded = np.array([float(f"{value:.12g}") for value in values], dtype=float)
    keys = -rounded if higher_is_better else rounded
    known = ~np.isnan(keys)
    ranks = np.full(len(keys), known.sum() + (1 + (~known).sum()) / 2)  # NaNs share the last
    ranks[known] = scipy.stats.rankdata(keys[known], method="average")
    return ranks.tolist()


def comparisons(rows: list[dict]) -> pd.DataFrame:
    """The rows beyond the training length, with ``members`` (configurations in their
    comparison: ``COMPARISON``) and ``someone_learned`` (a run of the comparison learned in
    distribution, or could not be checked: language modelling)."""
    table = pd.DataFrame([r for r in rows if not r["in_distribution"]], dtype=object)
    if table.empty:
        return table
    groups = table.groupby(COMPARISON, sort=False, dropna=False)
    table["members"] = groups["_hash"].transform("size")
    learned = groups["_n_learned"].transform("sum") + groups["_n_unchecked"].transform("sum")
    return table.assign(someone_learned=learned > 0)


def ranked_rows(rows: list[dict]) -> pd.DataFrame:
    """The rows that take part in a ranked comparison (one holding at least two PEs with a mean,
    in which some encoding learned), with their ``rank`` in it."""
    table = comparisons(rows)
    if table.empty:
        return table
    table = table[table["someone_learned"] & (table["n_seeds"] > 0)]
    ranks = [
        pd.Series(average_ranks(list(members["mean"]), METRIC_DIRECTIONS[metric]), members.index)
        for (*_, metric), members in table.groupby(COMPARISON, sort=False, dropna=False)
        if len(members) >= 2
    ]
    return table.assign(rank=pd.concat(ranks)).dropna(subset=["rank"]) if ranks else table[:0]


def pe_labels(rows: list[dict]) -> dict[str, str]:
    """Display name of each configuration's PE: its name, plus its ``pe.*`` settings when the
    folder holds several variants of that PE (so RoPE base 500 and base 10⁴ rank apart)."""
    return {
        row["_hash"]: str(row["pe"]) + (f" ({row['_pe_settings']})" if row["_pe_settings"] else "")
        for row in rows
    }


def rank_pes(rows: list[dict]) -> list[dict]:
    """Mean reciprocal rank of each PE, over all tasks ('all') and, when there are several
    tasks, per task ('task=<name>').

    A comparison is one (configuration without its PE, length beyond training, protocol,
    metric) holding at least two PEs with a mean, in which at least one run of some PE learned
    the task in distribution; within it PEs are ranked by mean (ties share the average rank)
    and each PE scores 1/rank. MRR = mean score over the comparisons a PE takes part in."""
    table = ranked_rows(rows)
    if table.empty:
        return []
    table["label"] = table["_hash"].map(pe_labels(rows))
    scopes = [table.assign(scope="all")]
    if table["task"].nunique(dropna=False) > 1:
        scopes.append(table.assign(scope=[f"task={task}" for task in table["task"]]))
    scores = pd.concat(scopes).groupby(["scope", "label"], sort=False)["rank"]
    ranking = pd.DataFrame(
        {
            "mrr": scores.agg(lambda ranks: math.fsum(1.0 / ranks) / len(ranks)),
            "mean_rank": scores.agg(lambda ranks: math.fsum(ranks) / len(ranks)),
            "n_comparisons": scores.size(),
            "n_best": scores.agg(lambda ranks: int((ranks < 2).sum())),  # shared first places too
        }
    )
    ranking = ranking.reset_index().rename(columns={"label": "pe"})
    ranking = ranking.assign(other_scope=ranking["scope"] != "all", minus_mrr=-ranking["mrr"])
    ranking = ranking.sort_values(["other_scope", "scope", "minus_mrr", "pe"], kind="stable")
    ranking["position"] = ranking.groupby("scope", sort=False).cumcount() + 1
    order = ["scope", "pe", "mrr", "mean_rank", "n_comparisons", "n_best", "position"]
    return ranking[order].to_dict("records")


def left_out_comparisons(rows: list[dict]) -> list[dict]:
    """The comparisons (two PEs or more) left out of the ranking because no run of any PE in
    them learned the task in distribution, counted per task, model, train_len and protocol."""
    table = comparisons(rows)
    if table.empty:
        return []
    table = table[(table["members"] >= 2) & ~table["someone_learned"].astype(bool)]
    counts = table.drop_duplicates(COMPARISON).groupby(TABLE, sort=False).size()
    return [
        {"scope": "left out", **dict(zip(TABLE, key, strict=True)), "n_comparisons": int(count)}
        | {"reason": f"no encoding learned {key[0]} in distribution"}
        for key, count in counts.items()
    ]
