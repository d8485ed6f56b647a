"""The statistics of a sweep (pandas, scipy.stats): per configuration × length × protocol the
mean, std, 95% t-interval, min, max, best and worst over seeds, the trivial baseline and the
spread over position draws; per configuration × protocol the length-generalisation ratio ρ_τ
over seeds; the settings that tell configurations apart (docs/analysis.md). The MRR ranking of
PEs over these rows is .ranking's."""

from __future__ import annotations

import json
import math
import os
import re
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd
import scipy.stats

from lengen.aggregate.load import RunRecord, config_hash, identity, load_runs
from lengen.aggregate.ranking import rank_pes, ranking_columns
from lengen.aggregate.verdicts import (
    DEFAULT_TEST_RULE,
    annotate_rows,
    comparison_verdicts,
    parse_test_rule,
    trained_runs,
)
from lengen.identity import AVERAGED_MAY_DIFFER
from lengen.results import (
    LEARNED_ACCURACY,
    LM_FALLBACK_METRIC,
    METRIC_DIRECTIONS,
    RATIO_THRESHOLDS,
    length_ratio,
    length_unit,
    result_tags,
    results_name,
)

#: columns shown by name; the other keys that distinguish configurations go into ``settings``
NAMED_KEYS = ("pe.name", "data.name", "model.name", "data.len")
#: Config subtrees that belong to one named component (key prefix -> the key naming it): their
#: keys are compared among configurations of the same component, so a RoPE row is not labelled
#: with keys ALiBi lacks, nor a copy row with addition's ``data.task.base``.
COMPONENTS = {"pe.": "pe.name", "data.task.": "data.name"}
BASELINE_METRICS = ("accuracy", "exact_match")  # results rows carry ``baseline_<metric>``
SUMMARY_COLUMNS = (
    *("config_hash", "pe", "task", "model", "train_len", "settings", "protocol", "length"),
    *("in_distribution", "metric", "n_seeds", "seeds", "mean", "std", "ci95_low", "ci95_high"),
    *("best_of_seeds", "n_not_learned", "n_examples", "chance_accuracy", "baseline"),
    *("above_baseline", "draw_std", "position_draws", "worst_of_seeds", "min", "max"),
    "n_nan",  # seeds whose value was NaN: left out of n_seeds and of every statistic
    # whether the row's comparison is a test of its claim, and the runs of its configuration
    # that reached the in-distribution criterion (lengen.aggregate.verdicts)
    *("comparison", "n_reached"),
)
#: ratios.csv: ρ_τ per configuration × protocol × τ, over seeds (``ratio_rows``)
RATIO_COLUMNS = (
    *("config_hash", "pe", "task", "model", "train_len", "settings", "protocol", "metric"),
    *("tau", "n_seeds", "seeds", "mean", "std", "ci95_low", "ci95_high", "min", "max"),
    *("n_zero", "n_capped", "longest_ratio", "n_not_learned"),
)
#: the seed statistic the tables show and the ranking ranks by (``--statistic``): the mean, or
#: the maximum / minimum over seeds, as papers that report the best seed do
STATISTICS = ("mean", "max", "min")


@dataclass
class Summary:
    """Everything the reports and figures need: ``rows`` (summary.csv, and private ``_`` keys),
    ``ranking`` and ``left_out`` (ranking.csv), ``ranked`` (the rows the ranking used)."""

    folder: Path  # several sweeps compared: their common parent
    metric: str
    min_accuracy: float
    exclude_not_learned: bool
    tag: str | None
    runs: list[RunRecord]
    reached_criterion: bool = False
    statistic: str = "mean"
    ratio_thresholds: tuple[float, ...] = RATIO_THRESHOLDS
    test_rule: tuple[int, int] = parse_test_rule(DEFAULT_TEST_RULE)  # (K, N): K of N seeds
    verdicts: list[dict] = field(default_factory=list)  # verdicts.json: each comparison's class
    rows: list[dict] = field(default_factory=list)
    ratios: list[dict] = field(default_factory=list)  # ratios.csv: ρ_τ over seeds
    ranking: list[dict] = field(default_factory=list)
    left_out: list[dict] = field(default_factory=list)  # comparisons no encoding learned
    ignored_tag_files: list[str] = field(default_factory=list)
    ranked: pd.DataFrame = field(default_factory=pd.DataFrame)  # rows with their rank
    sources: list[tuple[str | None, Path]] = field(default_factory=list)  # (sweep label, folder)

    failed = property(lambda self: [r for r in self.runs if r.status == "failed"])
    duplicates = property(lambda self: [r for r in self.runs if r.status == "duplicate"])
    excluded = property(lambda self: [r for r in self.runs if r.status == "excluded"])
    aggregated = property(lambda self: [r for r in self.runs if r.status == "ok"])
    not_learned = property(lambda self: [r for r in self.aggregated if r.learned is False])
    nan_rows = property(lambda self: [r for r in self.rows if r["n_nan"]])
    table = property(lambda self: pd.DataFrame(self.rows, columns=list(SUMMARY_COLUMNS)))
    ratio_table = property(lambda self: pd.DataFrame(self.ratios, columns=list(RATIO_COLUMNS)))

    @property
    def ranking_table(self) -> pd.DataFrame:
        """ranking.csv as a DataFrame, as ``table`` and ``ratio_table`` are summary.csv and
        ratios.csv: the ranking, then the comparisons left out (``ranking`` stays the list of
        records it has always been, for code that reads it so)."""
        columns = list(ranking_columns(self.ratio_thresholds))
        return pd.DataFrame(self.ranking + self.left_out, columns=columns)


def aggregate(
    folder: str | Path | list,
    *,
    metric: str = "exact_match",
    min_accuracy: float = LEARNED_ACCURACY,
    exclude_not_learned: bool = False,
    tag: str | None = None,
    reached_criterion: bool = False,
    statistic: str = "mean",
    ratio_thresholds=RATIO_THRESHOLDS,
    test_rule: str = DEFAULT_TEST_RULE,
) -> Summary:
    """Find, load, group and summarise every run below ``folder``; ``statistic`` is what the
    tables show and the ranking ranks by, ``ratio_thresholds`` the τ of ρ_τ, ``test_rule``
    ("K/N") when a comparison is a test (``lengen.aggregate.verdicts``).

    ``folder`` may be a list of folders, or of (label, folder) pairs, to compare sweeps: each
    run gets the key ``sweep`` = its folder's label (default: the folder's name) in its config,
    so runs of different sweeps are never averaged together and the label shows in
    ``settings`` (docs/analysis.md, *Comparing sweeps*)."""
    if metric not in METRIC_DIRECTIONS:
        raise ValueError(f"metric must be one of {', '.join(METRIC_DIRECTIONS)}; got {metric!r}")
    if not 0.0 <= min_accuracy <= 1.0:
        raise ValueError(f"min_accuracy must be in [0, 1], got {min_accuracy}")
    if statistic not in STATISTICS:
        raise ValueError(f"statistic must be one of {', '.join(STATISTICS)}; got {statistic!r}")
    ratio_thresholds = tuple(float(t) for t in ratio_thresholds)
    if not ratio_thresholds or not all(0 < t <= 1 for t in ratio_thresholds):
        raise ValueError(f"ratio thresholds must be numbers in (0, 1], got {ratio_thresholds}")
    rule = parse_test_rule(test_rule)
    sources = sweep_sources(folder)
    runs = []
    for label, path in sources:
        found = load_runs(path, tag, min_accuracy, reached_criterion)
        runs += found if label is None else [label_run(run, label) for run in found]
    folder = sources[0][1]
    if len(sources) > 1:
        folder = Path(os.path.commonpath([path.absolute() for _, path in sources]))
    args = (folder, metric, min_accuracy, exclude_not_learned, tag, runs, reached_criterion)
    summary = Summary(*args, statistic=statistic, ratio_thresholds=ratio_thresholds)
    summary.sources, summary.test_rule = sources, rule
    if tag is None:  # re-evaluations are listed, never mixed in
        summary.ignored_tag_files = [
            f"{run.name}/{results_name(t)}" for run in runs for t in result_tags(run.path)
        ]
    summary.rows = summary_rows(summary)
    arms = distinguishing(trained_runs(runs), list(NAMED_KEYS[1:]))
    summary.verdicts = comparison_verdicts(runs, rule, arms)
    annotate_rows(summary.rows, summary.verdicts)
    summary.ratios = ratio_rows(summary)
    summary.ranking, summary.left_out, summary.ranked = rank_pes(
        summary.rows, statistic, summary.ratios
    )
    return summary


def sweep_sources(folder) -> list[tuple[str | None, Path]]:
    """``aggregate``'s ``folder`` -> [(label, path)]: one folder -> [(None, path)]; several ->
    each with its label (given, or the folder's name); labels must differ, folders must exist."""
    items = [folder] if isinstance(folder, (str, Path)) else list(folder)
    pairs = [item if isinstance(item, tuple) else (None, item) for item in items]
    if not pairs:
        raise ValueError("no folder given")
    pairs = [(label, Path(path)) for label, path in pairs]
    for _, path in pairs:
        if not path.is_dir():
            raise FileNotFoundError(f"{path}: not a directory")
    if len(pairs) == 1:
        return pairs
    labelled = [(label or path.absolute().name, path) for label, path in pairs]
    labels = [label for label, _ in labelled]
    if len(set(labels)) < len(labels):
        raise ValueError(
            f"two sweeps share the label {max(labels, key=labels.count)!r}: name them "
            "LABEL=FOLDER (e.g. base=results/a yarn=results/b)"
        )
    return labelled


def label_run(run: RunRecord, label: str) -> RunRecord:
    """``run`` as a member of sweep ``label``: ``sweep: label`` in its config (a configuration
    of its own), its name prefixed ``label/``."""
    run.name = f"{label}/{run.name}"
    if run.config is not None:
        run.config = {**run.config, "sweep": label}
        if run.config_hash is not None:
            run.config_hash = config_hash(run.config, near=run.path)
    return run


def seed_statistics(values: list[float], higher_is_better: bool) -> dict:
    """n, mean, sample std (ddof = 1), the 95% Student t interval mean ± t_{0.975, n−1} · std / √n,
    ``min`` and ``max``, and the best and worst of ``values`` (one per seed) by the metric's
    direction; None where n is too small for a statistic. The sums are correctly rounded
    (``math.fsum``): the result does not depend on the seeds' order."""
    n, values = len(values), pd.Series(values, dtype=float)
    keys = ("mean", "std", "ci95_low", "ci95_high", "best_of_seeds", "worst_of_seeds")
    stats = dict.fromkeys((*keys, "min", "max"))
    if n >= 1:
        mean = math.fsum(values) / n
        low, high = float(values.min()), float(values.max())  # NaN-skipping, like pandas
        best, worst = (high, low) if higher_is_better else (low, high)
        stats |= {"mean": mean, "best_of_seeds": best, "worst_of_seeds": worst}
        stats |= {"min": low, "max": high}
    if n >= 2:
        std = math.sqrt(math.fsum((values - mean) ** 2) / (n - 1))
        half_width = float(scipy.stats.t.ppf(0.975, n - 1) * std / math.sqrt(n))
        stats |= {"std": std, "ci95_low": mean - half_width, "ci95_high": mean + half_width}
    return {"n": n, **stats}


def summary_rows(summary: Summary) -> list[dict]:
    """One dict per configuration × length × protocol (``SUMMARY_COLUMNS`` and private ``_``
    keys for ranking and plots), sorted by task, model, train_len, protocol, pe, settings,
    length."""
    cells = defaultdict(list)  # (hash, length, protocol) -> [(run, results row)]
    for run in summary.aggregated:
        for row in run.results["eval"]:
            cells[run.config_hash, row["length"], row["protocol"]].append((run, row))
    metrics = [summary.metric]  # a task metric is null on language-modelling rows: ppl there
    metrics += [LM_FALLBACK_METRIC] if METRIC_DIRECTIONS[summary.metric] else []
    settings = distinguishing(summary.aggregated, list(NAMED_KEYS[1:]))
    pe_settings = distinguishing(summary.aggregated, [], "pe.")  # its PE's label in the ranking
    out = []
    for (digest, length, protocol), members in cells.items():
        run, rows = members[0][0], [row for _, row in members]
        metric = next((m for row in rows for m in metrics if row.get(m) is not None), metrics[0])
        learned = [run.learned for run, _ in members]  # True, False, None: not checked
        kept = [
            (run, row)
            for run, row in members
            if row.get(metric) is not None
            and not (summary.exclude_not_learned and run.learned is False)
        ]
        # a null value is no sample; a NaN (a diverged run) is none either, but it is counted
        # (n_nan) and reported, never averaged into "nan ± nan"
        counted = [(run, row) for run, row in kept if not _is_nan(row[metric])]
        counted.sort(key=lambda pair: pair[0].seed_key)
        stat = seed_statistics([row[metric] for _, row in counted], METRIC_DIRECTIONS[metric])
        chances = {row.get("chance_accuracy") for row in rows} - {None}
        baseline = _mean([row.get(f"baseline_{metric}") for _, row in counted])
        baseline = baseline if metric in BASELINE_METRICS else None
        beaten = baseline_verdict(counted, metric, baseline, stat)
        out.append(
            {
                "config_hash": digest[:10],
                **{name: run.results[name] for name in ("pe", "task", "model", "train_len")},
                "settings": settings[digest],
                "protocol": protocol,
                "length": length,
                "in_distribution": bool(rows[0].get("in_distribution")),
                "metric": metric,
                "n_seeds": stat.pop("n"),
                "seeds": " ".join(run.seed_label for run, _ in counted),
                **stat,
                "n_not_learned": learned.count(False),
                "n_examples": min(row["n_examples"] for row in rows),
                "chance_accuracy": chances.pop() if len(chances) == 1 else None,
                "baseline": baseline,
                "above_baseline": beaten,
                "draw_std": _mean([row.get(f"{metric}_draw_std") for _, row in counted]),
                "position_draws": min(
                    {row.get("position_draws") for _, row in counted} - {None}, default=None
                ),
                "n_nan": len(kept) - len(counted),
                "_hash": digest,
                "_nan_runs": [run.name for run, row in kept if _is_nan(row[metric])],
                "_seed_values": [(run.seed_label, row[metric]) for run, row in counted],
                "_pe_settings": pe_settings[digest],
                "_n_learned": learned.count(True),
                "_n_unchecked": learned.count(None),
                "_length_unit": length_unit(rows[0]),
                "_rank_hash": config_hash(run.config, (*AVERAGED_MAY_DIFFER, "pe"), near=run.path),
            }
        )
    named = ("task", "model", "pe")
    order = ("task", "model", "train_len", "protocol", "pe", "settings", "length")
    return sorted(out, key=lambda r: tuple(str(r[k]) if k in named else r[k] for k in order))


def ratio_rows(summary: Summary) -> list[dict]:
    """ρ_τ over seeds per configuration × protocol × τ (ratios.csv; ``RATIO_COLUMNS``, and
    ``_hash``): each run's ρ_τ from its own rows (``lengen.results.length_ratio``) on the
    metric of the configuration's summary rows (ppl on language-modelling rows, relative to the
    training length), then ``seed_statistics`` over the runs (larger ρ is better). ``n_zero``
    counts runs whose ρ is 0 (τ failed at the training length), ``n_capped`` those that kept τ
    up to their longest length (ρ a lower bound there)."""
    cells = defaultdict(list)  # (hash, protocol) -> [(run, its rows of that protocol)]
    for run in summary.aggregated:
        for protocol in sorted({row["protocol"] for row in run.results["eval"]}):
            rows = [row for row in run.results["eval"] if row["protocol"] == protocol]
            # a NaN compares False with τ and would pass it: a missing value (a failure)
            rows = [{k: None if _is_nan(v) else v for k, v in row.items()} for row in rows]
            cells[run.config_hash, protocol].append((run, rows))
    described = {(row["_hash"], row["protocol"]): row for row in summary.rows}
    out = []
    for (digest, protocol), members in cells.items():
        row = described[digest, protocol]
        train_len, metric = row["train_len"], row["metric"]
        members.sort(key=lambda member: member[0].seed_key)
        kept = [
            (run, rows)
            for run, rows in members
            if not (summary.exclude_not_learned and run.learned is False)
        ]
        for tau in summary.ratio_thresholds:
            ratios = [(run, rows, length_ratio(rows, train_len, tau, metric)) for run, rows in kept]
            ratios = [(run, rows, ratio) for run, rows, ratio in ratios if ratio is not None]
            longest = [max(r["length"] for r in rows) / train_len for _, rows, _ in ratios]
            stat = seed_statistics([ratio for *_, ratio in ratios], higher_is_better=True)
            out.append(
                {
                    **{key: row[key] for key in RATIO_COLUMNS[:6]},
                    "protocol": protocol,
                    "metric": metric,
                    "tau": tau,
                    "n_seeds": stat.pop("n"),
                    "seeds": " ".join(run.seed_label for run, *_ in ratios),
                    **{key: stat[key] for key in ("mean", "std", "ci95_low", "ci95_high")},
                    **{key: stat[key] for key in ("min", "max")},
                    "n_zero": sum(ratio == 0 for *_, ratio in ratios),
                    "n_capped": sum(
                        ratio > 0 and ratio >= bound
                        for (*_, ratio), bound in zip(ratios, longest, strict=True)
                    ),
                    "longest_ratio": max(longest, default=None),
                    "n_not_learned": sum(run.learned is False for run, _ in members),
                    "_hash": digest,
                }
            )
    order = ("task", "model", "train_len", "protocol", "pe", "settings")
    named = ("task", "model", "pe")
    # as summary.csv's rows, then τ from the strictest down (0.9 before 0.5)
    return sorted(
        out, key=lambda r: (*(str(r[k]) if k in named else r[k] for k in order), -r["tau"])
    )


def _is_nan(value) -> bool:
    return isinstance(value, float) and math.isnan(value)


#: a value beats the trivial baseline only by more than this (accuracy, exact match in [0, 1])
BASELINE_MARGIN = 0.01


def baseline_verdict(counted: list, metric: str, baseline, stat: dict) -> bool | None:
    """True where every seed beats its row's baseline by more than ``BASELINE_MARGIN`` (any n;
    2 seeds' t-interval, ±12.7 standard errors, once called two seeds at 10× it "not above") or
    the 95% t-interval's lower end beats it; False where no seed does or the upper end does not;
    None without a baseline, or where seeds disagree and the interval does not decide."""
    if baseline is None or not counted:
        return None
    pairs = [(row[metric], row.get(f"baseline_{metric}")) for _, row in counted]  # paired
    above = [v > (baseline if b is None else b) + BASELINE_MARGIN for v, b in pairs]
    threshold = baseline + BASELINE_MARGIN
    if all(above) or (stat["ci95_low"] is not None and stat["ci95_low"] > threshold):
        return True
    if not any(above) or (stat["ci95_high"] is not None and stat["ci95_high"] <= threshold):
        return False
    return None


def _mean(values: list) -> float | None:
    """Correctly rounded mean of the values that are not null or NaN; None without any."""
    values = pd.Series(values, dtype=object).dropna()
    return math.fsum(values) / len(values) if len(values) else None


# -- settings: the keys that set configurations apart -----------------------------------------
def distinguishing(runs: list[RunRecord], within: list[str], prefix: str = "") -> dict[str, str]:
    """For each configuration of ``runs``, the keys (those starting with ``prefix``), sorted, that
    set it apart from the configurations that agree with it on the ``within`` keys (a table of
    summary.md: task, model, train_len), as "key=value, …".

    A key counts when it takes two values (absent being one) among them, except the keys of
    one component only (``pe.base`` of RoPE, ``data.task.base`` of addition; ``COMPONENTS``):
    those count when they vary among configurations of that component, so RoPE rows are not
    labelled with keys ALiBi lacks. Options every PE has (``pe.randomized``) count like any
    other key. Keys absent in all of them never show; nor do the named columns; nor a key
    absent from this configuration (at its default, or no option of it: ``model.mixer.mixer``
    of a model whose mixer is a plain name was labelled ``model.mixer.mixer=null``)."""
    configs = {}
    for run in runs:  # the first run of a configuration stands for it
        configs.setdefault(run.config_hash, run.config)
    configs = {digest: identity(config) for digest, config in configs.items()}
    if not configs:
        return {}
    values = {d: {k: json.dumps(v, default=str) for k, v in f.items()} for d, f in configs.items()}
    frame = pd.DataFrame.from_dict(values, orient="index").fillna("absent")
    absent = pd.Series("absent", frame.index)
    tables = [frame.get(key, absent).to_numpy() for key in within] or [absent.to_numpy()]
    shown = frame.groupby(tables).transform("nunique") > 1
    incomplete = (frame == "absent").groupby(tables).transform("any")  # absent somewhere
    for component, name_key in COMPONENTS.items():  # its class follows its name
        keys = frame.columns[frame.columns.str.startswith(component)]
        own = incomplete[keys] | keys.str[len(component) :].isin(["_target_", "_partial_"])
        names = frame.get(name_key, absent).to_numpy()
        shown[keys] = shown[keys].where(
            ~own, frame[keys].groupby([*tables, names]).transform("nunique") > 1
        )
    return {
        digest: ", ".join(
            f"{key}={_label(key, configs[digest].get(key, 'null'))}"
            for key in sorted(frame)
            if shown.at[digest, key]
            and key not in NAMED_KEYS
            and key.startswith(prefix)
            and frame.at[digest, key] != "absent"  # its default, or not an option of this one
        )
        for digest in frame.index
    }


def _show(value) -> str:
    return value if isinstance(value, str) else json.dumps(value, separators=(",", ":"))


def _label(key: str, value) -> str:
    """A settings cell's value; ``init_from`` as the run directory it starts from, seed-blind.

    A configuration's first run stands for it, and each seed starts from its own seed's run, so
    the full path named one seed's folder, in a scratch place that is gone once a sweep is
    committed (``/tmp/…/passkey_…_seed0_7676…``); the directory's name with ``seed*`` names
    the base configuration for every seed."""
    if key != "init_from" or not isinstance(value, str):
        return _show(value)
    path = Path(value)
    run = path.parent.parent if path.parent.name == "checkpoints" else path  # a run's checkpoint
    return re.sub(r"_seed\d+_", "_seed*_", run.name)
