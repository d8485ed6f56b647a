"""Length-extension methods compared: each run's own evaluation (method ``none``) beside its
eval.py re-evaluations (``results.<tag>.json``: PI, NTK, dynamic NTK, YaRN, …), one table row
per configuration × method × length × protocol, over seeds as summary.csv (docs/analysis.md,
*Length-extension methods compared*). No torch here.

A re-evaluation is a configuration of its own in ``aggregate(folder, tag=…)`` (its overrides
are applied before hashing); here it is tied back to the configuration it re-evaluates through
its run directories, so one line of a figure is one trained configuration under one method.
"""

from __future__ import annotations

from lengen.aggregate.stats import SUMMARY_COLUMNS, Summary, aggregate
from lengen.results import result_tags

#: ``pe.scaling`` values -> the name a figure and table give the method
METHOD_NAMES = {"pi": "PI", "ntk": "NTK", "dynamic_ntk": "dynamic NTK", "yarn": "YaRN"}
#: ``pe.extension`` values (RoPE's training-free arms, docs/pe.md) -> their names, after these
ARM_NAMES = {"self_extend": "Self-Extend", "rerope": "ReRoPE", "dual_chunk": "DCA"}
#: extension.csv: the method, its tag and ``base_hash`` (the trained configuration's
#: config_hash, shared by its methods), then every summary.csv column of the row, so the two
#: tables agree column for column (baselines, seed min/max, best and worst seed included);
#: ``config_hash`` there is the re-evaluated configuration's own
EXTENSION_COLUMNS = ("method", "tag", "base_hash", *SUMMARY_COLUMNS)


def method_name(overrides: list[str] | None, tag: str) -> str:
    """A re-evaluation's method from the overrides eval.py recorded: ``pe.scaling=yarn`` with
    ``pe.scaling_factor=3`` -> "YaRN ×3"; any other override after it ("YaRN ×3, pe.x=1");
    ``pe.extension=rerope`` -> "ReRoPE, pe.rerope_window=8" ("Leaky ReRoPE" with a leak);
    without either the tag names it."""
    settings = dict(item.split("=", 1) for item in overrides or [] if "=" in item)
    scaling = settings.pop("pe.scaling", None)
    factor = settings.pop("pe.scaling_factor", None)
    arm = settings.pop("pe.extension", "none")
    if scaling not in (None, "none"):
        name = METHOD_NAMES.get(scaling, scaling) + (f" ×{float(factor):g}" if factor else "")
    elif arm != "none":
        name = ("Leaky " if "pe.rerope_leak" in settings else "") + ARM_NAMES.get(arm, arm)
    else:
        return tag
    return ", ".join([name, *(f"{key}={value}" for key, value in settings.items())])


def method_order(overrides: list[str] | None, tag: str) -> tuple:
    """Where a method sits in a table or legend: none, PI, NTK, dynamic NTK, YaRN, then the
    arms (``METHOD_NAMES``', ``ARM_NAMES``' order), others, then by factor, then by tag."""
    settings = dict(item.split("=", 1) for item in overrides or [] if "=" in item)
    ranks = {name: rank for rank, name in enumerate([*METHOD_NAMES, *ARM_NAMES], start=1)}
    factor = settings.get("pe.scaling_factor")
    try:
        factor = float(factor) if factor is not None else 0.0
    except ValueError:
        factor = 0.0
    method = settings.get("pe.scaling") or settings.get("pe.extension")
    return (ranks.get(method, len(ranks) + 1), factor, tag)


def extension_rows(summary: Summary) -> list[dict]:
    """Rows of every method for the configurations that have re-evaluations: the summary's own
    rows as method ``none``, then each tag's (aggregated with the summary's options), sorted by
    task, model, training length, protocol, configuration, method order (none first), length.
    [] where no run of the summary has a ``results.<tag>.json``."""
    if summary.tag is not None:
        return []
    tags = sorted({tag for run in summary.aggregated for tag in result_tags(run.path)})
    base_of = {run.name: run.config_hash[:10] for run in summary.aggregated}
    options = dict(metric=summary.metric, min_accuracy=summary.min_accuracy,
                   exclude_not_learned=summary.exclude_not_learned,
                   reached_criterion=summary.reached_criterion, statistic=summary.statistic,
                   ratio_thresholds=summary.ratio_thresholds)  # fmt: skip
    base_rows = {row["config_hash"]: row for row in summary.rows}
    out, extended = [], set()
    for tag in tags:
        tagged = aggregate(summary.sources or summary.folder, tag=tag, **options)
        runs_of: dict[str, list[str]] = {}
        for run in tagged.aggregated:
            runs_of.setdefault(run.config_hash[:10], []).append(run.name)
        for row in tagged.rows:
            bases = [base_of[name] for name in runs_of.get(row["config_hash"], [])
                     if name in base_of]  # fmt: skip
            if not bases:
                continue
            run = next(r for r in tagged.aggregated if r.config_hash[:10] == row["config_hash"])
            overrides = (run.results or {}).get("overrides")
            method, order = method_name(overrides, tag), method_order(overrides, tag)
            out.append(_row(row, method, tag, bases[0], base_rows[bases[0]], order))
            extended.add(bases[0])
    out += [_row(row, "none", None, row["config_hash"], row, (0, 0.0, "")) for row in summary.rows
            if row["config_hash"] in extended]  # fmt: skip
    order = ("task", "model", "train_len", "protocol", "pe", "settings", "base_hash", "_order")
    named = ("task", "model", "pe")
    return sorted(
        out, key=lambda r: (*(str(r[k]) if k in named else r[k] for k in order), r["length"])
    )


def _row(row: dict, method: str, tag, base_hash: str, base: dict, order: int) -> dict:
    """An extension.csv row: ``row``'s statistics under ``method``, described by its trained
    configuration ``base`` (pe, settings), with the private keys the figure uses."""
    return {**row, "method": method, "tag": tag, "base_hash": base_hash, "pe": base["pe"],
            "settings": base["settings"], "_order": order}  # fmt: skip
