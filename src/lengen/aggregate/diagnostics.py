"""Why runs extrapolate as far as they do, across a sweep: long DataFrames of the attention
diagnostics, accuracy by answer position and accuracy by depth of every run, their means over
seeds per configuration, and the sweep's figures and table of them (docs/analysis.md).

No torch here. A run contributes what its files hold: results.json's ``attention_diagnostics``
and ``accuracy_by_answer_position``, and ``accuracy_by_depth.json`` (retrieval tasks); runs
written before these existed contribute nothing, and are not errors.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd

from lengen.aggregate.load import RunRecord, load_runs
from lengen.results import LEARNED_ACCURACY, length_unit

#: the columns that say which run a row of a frame comes from
RUN_COLUMNS = ("run_dir", "config_hash", "pe", "task", "model", "train_len", "seed", "learned")


def attention_frame(section: dict | None) -> pd.DataFrame:
    """One run's ``attention_diagnostics`` -> one row per length × layer × head × statistic,
    columns ``length``, ``tokens``, ``layer``, ``head``, ``statistic``, ``bucket`` (the
    distance bucket's label for ``bucket_mass``, else None), ``value``; plus per length one
    ``sink_rate`` row (Gu et al.'s Sink^ε_1 over every layer and head: layer ``all``, head
    None), so ``attention_over_seeds`` gives its mean over seeds."""
    records = []
    for length, entry in (section or {}).get("lengths", {}).items():
        if entry.get("sink_rate") is not None:  # Gu et al.'s Sink^ε_1, over layers and heads
            records.append({"length": int(length), "tokens": entry["tokens"], "layer": "all",
                            "head": None, "statistic": "sink_rate", "bucket": None,
                            "value": entry["sink_rate"]})  # fmt: skip
        for layer, stats in entry["layers"].items():
            for statistic, per_head in stats.items():
                for head, value in enumerate(per_head):
                    common = {"length": int(length), "tokens": entry["tokens"], "layer": layer,
                              "head": head, "statistic": statistic}  # fmt: skip
                    if isinstance(value, list):  # bucket_mass: one value per distance bucket
                        labels = section.get("buckets", [])
                        records += [{**common, "bucket": labels[b] if b < len(labels) else str(b),
                                     "value": mass} for b, mass in enumerate(value)]  # fmt: skip
                    else:
                        records.append({**common, "bucket": None, "value": value})
    columns = ["length", "tokens", "layer", "head", "statistic", "bucket", "value"]
    return pd.DataFrame.from_records(records, columns=columns)


def position_frame(section: dict | None) -> pd.DataFrame:
    """One run's ``accuracy_by_answer_position`` -> one row per protocol × length × position
    (bin), columns ``protocol``, ``length``, ``position`` (first position of the bin),
    ``bin_width``, ``accuracy``."""
    records = []
    for protocol, by_length in (section or {}).get("protocols", {}).items():
        for length, entry in by_length.items():
            width = entry["bin_width"]
            records += [{"protocol": protocol, "length": int(length), "position": index * width,
                         "bin_width": width, "accuracy": value}
                        for index, value in enumerate(entry["accuracy"])]  # fmt: skip
    columns = ["protocol", "length", "position", "bin_width", "accuracy"]
    return pd.DataFrame.from_records(records, columns=columns)


def depth_frame(report: dict | None) -> pd.DataFrame:
    """One run's ``accuracy_by_depth.json`` -> its rows (length, depth_bin, depth_low,
    depth_high, n_examples, accuracy, exact_match)."""
    columns = ["length", "depth_bin", "depth_low", "depth_high", "n_examples", "accuracy"]
    columns.append("exact_match")
    return pd.DataFrame.from_records((report or {}).get("rows", []), columns=columns)


def read_depth_report(run_dir: Path, tag: str | None = None) -> dict | None:
    """``accuracy_by_depth<tag>.json`` of a run directory, or None where absent or unreadable."""
    path = Path(run_dir) / f"accuracy_by_depth{f'.{tag}' if tag else ''}.json"
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return None


@dataclass
class SweepDiagnostics:
    """Every aggregated run's frames, stacked, with :data:`RUN_COLUMNS` in front."""

    attention: pd.DataFrame = field(default_factory=pd.DataFrame)
    answer_position: pd.DataFrame = field(default_factory=pd.DataFrame)
    depth: pd.DataFrame = field(default_factory=pd.DataFrame)


def sweep_diagnostics(runs: list[RunRecord], tag: str | None = None) -> SweepDiagnostics:
    """The frames of the runs that aggregation counts (status ok, learned or not)."""
    parts: dict[str, list[pd.DataFrame]] = {"attention": [], "answer_position": [], "depth": []}
    for run in runs:
        if run.status != "ok" or run.results is None:
            continue
        results = run.results
        head = {"run_dir": run.name, "config_hash": (run.config_hash or "")[:10]}
        head |= {key: results.get(key) for key in ("pe", "task", "model", "train_len", "seed")}
        head["learned"] = run.learned
        frames = {
            "attention": attention_frame(results.get("attention_diagnostics")),
            "answer_position": position_frame(results.get("accuracy_by_answer_position")),
            "depth": depth_frame(read_depth_report(run.path, tag)),
        }
        for name, frame in frames.items():
            if not frame.empty:
                parts[name].append(frame.assign(**head)[[*RUN_COLUMNS, *frame.columns]])
    empty = {"attention": attention_frame(None), "answer_position": position_frame(None)}
    empty["depth"] = depth_frame(None)
    return SweepDiagnostics(**{name: _stack(frames, empty[name]) for name, frames in parts.items()})


def _stack(frames: list[pd.DataFrame], empty: pd.DataFrame) -> pd.DataFrame:
    """The frames one below the other; none: no rows, every column (the run's and ``empty``'s)."""
    if frames:
        return pd.concat(frames, ignore_index=True)
    return pd.DataFrame(columns=[*RUN_COLUMNS, *empty.columns])


def load_diagnostics(
    folder: str | Path, tag: str | None = None, *, min_accuracy: float = LEARNED_ACCURACY
) -> SweepDiagnostics:
    """The frames of every run below ``folder`` that aggregation would count (notebooks)."""
    return sweep_diagnostics(load_runs(folder, tag, min_accuracy), tag)


#: what a configuration is in the tables below (the hash is the group; the rest describes it)
CONFIGURATION = ["config_hash", "pe", "task", "model", "train_len"]


def attention_over_seeds(attention: pd.DataFrame) -> pd.DataFrame:
    """Per configuration × length × scalar statistic: each run's mean over layers and heads,
    then ``mean``, ``std`` and ``n_seeds`` over its seeds."""
    scalar = attention[attention["statistic"] != "bucket_mass"]
    if scalar.empty:
        return pd.DataFrame(columns=[*CONFIGURATION, "length", "statistic", "mean", "std",
                                     "n_seeds"])  # fmt: skip
    keys = [*CONFIGURATION, "length", "statistic"]
    per_run = scalar.groupby([*keys, "seed"], dropna=False)["value"].mean().reset_index()
    summary = per_run.groupby(keys, dropna=False)["value"].agg(["mean", "std", "count"])
    return summary.rename(columns={"count": "n_seeds"}).reset_index()


def depth_over_seeds(depth: pd.DataFrame) -> pd.DataFrame:
    """Per configuration × length × depth bin: ``exact_match`` and ``accuracy`` means over
    seeds, ``exact_match_std``, ``n_seeds`` and the instances per seed (``n_examples``)."""
    if depth.empty:
        return pd.DataFrame(columns=[*CONFIGURATION, "length", "depth_bin", "depth_low",
                                     "depth_high", "exact_match", "exact_match_std", "accuracy",
                                     "n_seeds", "n_examples"])  # fmt: skip
    keys = [*CONFIGURATION, "length", "depth_bin", "depth_low", "depth_high"]
    grouped = depth.groupby(keys, dropna=False)
    table = grouped.agg(
        exact_match=("exact_match", "mean"),
        exact_match_std=("exact_match", "std"),
        accuracy=("accuracy", "mean"),
        n_seeds=("exact_match", "count"),
        n_examples=("n_examples", "mean"),
    )
    return table.reset_index()


def write_sweep_diagnostics(
    runs: list[RunRecord],
    out_dir: str | Path,
    *,
    tag: str | None = None,
    labels: dict[str, str] | None = None,
    formats: tuple[str, ...] = ("png", "pdf"),
) -> list[Path]:
    """The sweep's diagnostics figures and table into ``out_dir`` -> the paths written:

    * ``attention_diagnostics_<task>_<model>_len<L>``: per statistic, the mean over layers,
      heads and seeds against length, one line per configuration (colour = PE);
    * ``depth_<task>_<model>_len<L>_<config>``: exact match by length × depth bin, mean over
      seeds, per configuration; ``accuracy_by_depth.csv``: the same numbers.

    ``labels``: config_hash (10 digits) -> the line's name (PE and settings); default the PE."""
    from lengen.atomic import atomic_write
    from lengen.plots.common import safe_name, save_figure
    from lengen.plots.sweep_diagnostics import depth_grid_figure, diagnostics_vs_length_figure

    out_dir, suffix = Path(out_dir), f".{tag}" if tag else ""
    frames = sweep_diagnostics(runs, tag)
    paths = []
    attention = attention_over_seeds(frames.attention)
    units = {(r.results["task"], r.results["model"], r.results["train_len"]):
             length_unit(r.results["eval"][0]) for r in runs
             if r.status == "ok" and r.results and r.results.get("eval")}  # fmt: skip
    for (task, model, train_len), panel in attention.groupby(["task", "model", "train_len"]):
        figure = diagnostics_vs_length_figure(panel, labels or {}, f"{task} · {model}", train_len,
                                              unit=units.get((task, model, train_len)))  # fmt: skip
        name = safe_name(f"attention_diagnostics_{task}_{model}_len{train_len}") + suffix
        paths += save_figure(figure, out_dir / name, formats)
    depth = depth_over_seeds(frames.depth)
    if not depth.empty:
        path = out_dir / f"accuracy_by_depth{suffix}.csv"
        atomic_write(path, depth.to_csv(index=False))
        paths.append(path)
    for keys, grid in depth.groupby(CONFIGURATION):
        config, pe, task, model, train_len = keys
        label = (labels or {}).get(config, str(pe))
        figure = depth_grid_figure(grid, f"{task} · {model} · {label}", train_len)
        name = safe_name(f"depth_{task}_{model}_len{train_len}_{pe}_{config}") + suffix
        paths += save_figure(figure, out_dir / name, formats)
    return paths
