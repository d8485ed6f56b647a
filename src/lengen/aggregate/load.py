"""Reading a sweep folder back: run directories (:class:`RunRecord`), their config and results,
configuration hashes, and :func:`load_sweep` (every run as one DataFrame). The rules:
docs/analysis.md; which runs are the same configuration is ``lengen.identity``'s rule
(``AVERAGED_MAY_DIFFER``), which this module applies to the runs of a folder."""

from __future__ import annotations

import contextlib
import json
import math
import os
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from lengen.identity import AVERAGED_MAY_DIFFER, digest, flatten, measured_identity
from lengen.results import (
    CONFIG_NAME,
    LEARNED_ACCURACY,
    ROW_KEYS,
    in_distribution_accuracy,
    load_results,
    results_name,
    schema_problems,
    sort_rows,
)
from lengen.section_shapes import section_problems

#: folders a run writes that are never runs (wandb's hold config.yaml files of wandb's own)
RUN_SUBFOLDERS = ("wandb", "checkpoints", "logs")
#: what a run is, by name in results.json -> config key (for runs without results)
DESCRIBED = {"pe": "pe.name", "task": "data.name", "model": "model.name"}
DESCRIBED |= {"train_len": "data.len", "seed": "seed"}


def identity(
    config: dict,
    ignored: tuple[str, ...] = AVERAGED_MAY_DIFFER,
    *,
    near: Path | None = None,
    _depth: int = 0,
) -> dict:
    """The flat config that identifies a configuration (``lengen.identity.measured_identity``),
    ``init_from`` counted by the hash of the run it points to where that run can be found
    (``near``: the run's own folder, for a base run moved with it)."""
    return measured_identity(config, ignored, lambda init_from: _base_hash(init_from, _depth, near))


#: how many folders above a fine-tune a base run that moved with it is looked for
MOVED_DEPTH = 3


def _base_hash(init_from: str, depth: int, near: Path | None = None) -> str | None:
    """The configuration hash of the run ``init_from`` names (a run directory, or a checkpoint
    in one), or None where none is found or its config.yaml cannot be read; a chain of
    fine-tunes is followed 8 runs deep. Where the path is gone (a run copied into results/
    from a scratch folder), a folder of the same name beside ``near`` or up to
    ``MOVED_DEPTH`` folders above it stands for it: otherwise a recalibration's
    configuration changed with the machine its base was trained on."""
    path = Path(init_from)
    if not path.exists() and near is not None:
        name = path.name if path.suffix != ".ckpt" else None
        for above in [near, *near.parents][1 : MOVED_DEPTH + 1]:
            if name and (above / name / CONFIG_NAME).is_file():
                path = above / name
                break
    for run_dir in [path] if path.is_dir() else [path.parent, path.parent.parent]:
        if depth < 8 and (run_dir / CONFIG_NAME).is_file():
            with contextlib.suppress(OSError, ValueError):
                return config_hash(read_config(run_dir / CONFIG_NAME), _depth=depth + 1)
            return None  # the nearest config.yaml decides, readable or not
    return None


def config_hash(
    config: dict,
    ignored: tuple[str, ...] = AVERAGED_MAY_DIFFER,
    *,
    near: Path | None = None,
    _depth: int = 0,
) -> str:
    """sha256 (hex) of the canonical JSON of :func:`identity`."""
    return digest(identity(config, ignored, near=near, _depth=_depth))


def read_config(path: Path) -> dict:
    import yaml  # here: importing the package stays fast

    if not isinstance(config := yaml.safe_load(path.read_text()), dict):
        raise ValueError(f"{path.name} is not a mapping")
    return config


@dataclass
class RunRecord:
    """One run directory of a sweep folder and what became of it (not ``lengen.api.Run``, the
    rebuilt model of one run: this holds only what its files say)."""

    path: Path
    name: str  # relative to the folder, for display
    status: str = "ok"  # ok | failed | duplicate | excluded (--reached-criterion)
    reason: str = ""
    config: dict | None = None
    results: dict | None = None
    config_hash: str | None = None
    id_accuracy: float | None = None  # accuracy at the training length, in distribution
    learned: bool | None = None  # None: could not be checked (no accuracy at the train length)

    @property
    def data_seed(self) -> int | None:
        """The seed of its training stream: results.json's ``data_seed``; for results written
        before it existed, config.yaml's ``data.seed``, else the seed (what seeded it then)."""
        results, config = self.results or {}, flatten(self.config or {})
        seed = results.get("seed", config.get("seed"))
        if results.get("data_seed") is not None:
            return results["data_seed"]
        return seed if config.get("data.seed") is None else config["data.seed"]

    @property
    def seed_key(self) -> tuple:
        """(seed, data seed): a replicate of its configuration; sorts the seeds."""
        seed = (self.results or {}).get("seed", flatten(self.config or {}).get("seed"))
        return (seed, self.data_seed)

    @property
    def seed_label(self) -> str:
        """The seed as summary.csv's ``seeds`` lists it: ``3``, or ``3:5`` (seed 3, data seed 5)
        where the training stream had a seed of its own."""
        seed, data_seed = self.seed_key
        return str(seed) if data_seed == seed else f"{seed}:{data_seed}"

    @property
    def criterion(self) -> dict:
        """results.json's ``criterion`` ({} for runs trained for a fixed number of steps)."""
        return (self.results or {}).get("criterion") or {}

    @property
    def record(self) -> dict:
        """The run's line of runs.csv (and the first columns of load_sweep): status not_learned
        for an ok run that did not learn; pe, task, model, train_len, seed from results.json,
        else from config.yaml."""
        if self.results is not None:
            described = {name: self.results.get(name) for name in DESCRIBED}
        else:
            flat = flatten(self.config or {})
            described = {name: flat.get(key) for name, key in DESCRIBED.items()}
        status = "not_learned" if self.status == "ok" and self.learned is False else self.status
        return {
            "run_dir": self.name,
            "status": status,
            "reason": self.reason,
            "config_hash": (self.config_hash or "")[:10] or None,
            **described,
            "data_seed": self.data_seed,
            "id_accuracy": self.id_accuracy,
            "criterion_reached": self.criterion.get("reached"),
            "reached_at_step": self.criterion.get("reached_at_step"),
        }

    def fail(self, reason: str) -> RunRecord:
        self.status, self.reason = "failed", reason
        return self


#: the values a results row's metrics may hold, closed ranges (NaN, a diverged run, and null
#: are counted apart by the statistics); ppl and loss may be inf (evaluation/text.py writes an
#: overflowing perplexity as inf), a rate may not
METRIC_RANGES = {
    **dict.fromkeys(("accuracy", "exact_match", "chance_accuracy"), (0.0, 1.0)),
    **dict.fromkeys(("baseline_accuracy", "baseline_exact_match"), (0.0, 1.0)),
    **dict.fromkeys(("loss", "bits_per_byte"), (0.0, math.inf)),
    "ppl": (1.0, math.inf),
}
#: the least a results row's counts may be (a row measures at least one position of one
#: instance): a length of -8 or n_examples of -5 was aggregated as a value (KB89, KB90)
COUNT_MINIMA = {"length": 1, "max_position": 1, "n_examples": 1, "n_unique": 1}
#: the sections of results.json that aggregation and its figures read: objects where present
SECTIONS = ("attention_diagnostics", "accuracy_by_answer_position", "validation")


def value_problems(results: dict, name: str) -> list[str]:
    """Values no run writes (an accuracy of -5 or inf, a section that is a string): a damaged
    or hand-edited file, which would pass into the statistics as a value ("inf (n=1)") or end
    the figures in a traceback. -> one reason per problem, naming the file and the entry."""
    problems = [
        f"{name}: {key} is {type(results[key]).__name__}, not an object"
        for key in SECTIONS
        if results.get(key) is not None and not isinstance(results[key], dict)
    ]
    problems += section_problems(results, name)  # a part of the wrong kind inside one (PL05b)
    seen: dict[tuple, int] = {}  # (length, protocol) -> the row that measured it first
    for index, row in enumerate(results["eval"]):
        for key, least in COUNT_MINIMA.items():
            value = row.get(key)
            if isinstance(value, int) and not isinstance(value, bool) and value < least:
                problems.append(f"{name}: eval[{index}].{key}={value} is under {least}")
        cell = (row.get("length"), row.get("protocol"))
        if cell in seen:  # rows are unique per (length, protocol): a copy would count twice
            problems.append(
                f"{name}: eval[{index}] repeats eval[{seen[cell]}] (length {cell[0]}, "
                f"protocol {cell[1]}; rows are unique per length and protocol)"
            )
        seen.setdefault(cell, index)
        for key, (low, high) in METRIC_RANGES.items():
            value = row.get(key)
            number = isinstance(value, int | float) and not isinstance(value, bool)
            if number and not math.isnan(value) and not low <= value <= high:
                problems.append(
                    f"{name}: eval[{index}].{key}={value} is outside [{low:g}, {high:g}]"
                )
    return problems


def config_problems(config: dict, results: dict, name: str) -> list[str]:
    """Where config.yaml does not say what ``results`` records of the run (``DESCRIBED``: its
    encoding, task, model, training length and seed, written from the same config by
    ``lengen.results``): a file cut short that still parses (AN03: 40 bytes, ``pe:
    randomized: false``, aggregated as a configuration of its own) or another run's. Keys that
    ``results`` leaves null or out are not asked for (tests and old runs write fewer)."""
    flat = flatten(config)
    recorded = {
        key: results[field] for field, key in DESCRIBED.items() if results.get(field) is not None
    }
    missing = [key for key in recorded if key not in flat]
    problems = [
        f"{CONFIG_NAME} has no {', '.join(missing)}, which {name} records (cut short?)"
    ] if missing else []  # fmt: skip
    problems += [
        f"{CONFIG_NAME}'s {key}={flat[key]} but {name} records {value}"
        for key, value in recorded.items()
        if key in flat and flat[key] != value
    ]
    return problems


def read_run(run: RunRecord, tag: str | None, min_accuracy: float) -> RunRecord:
    """Read ``run``'s config and results; a run that cannot be used fails with the reason (a
    sweep with broken runs still aggregates; the reasons go to failed.csv)."""
    try:
        run.config = read_config(run.path / CONFIG_NAME)
    except Exception as error:  # yaml errors, unreadable files: report, never crash
        return run.fail(f"unreadable config.yaml ({type(error).__name__})")
    name = results_name(tag)
    if not (run.path / name).is_file():
        reason = f"no {name} (failed, unfinished or still running)"
        with contextlib.suppress(OSError, ValueError, KeyError):  # written by lengen.cli
            reason = f"failed: {json.loads((run.path / 'failed.json').read_text())['error']}"
        return run.fail(reason)
    try:
        results = load_results(run.path / name)
    except Exception as error:
        return run.fail(f"unreadable {name} ({error})")
    if problems := schema_problems(results):
        return run.fail(f"{name} does not follow the schema: {'; '.join(problems[:3])}")
    if not results["eval"]:
        return run.fail(f"{name} has no evaluation rows")
    if problems := value_problems(results, name):
        return run.fail("; ".join(problems[:3]))
    if problems := config_problems(run.config, results, name):
        return run.fail("; ".join(problems[:3]))
    run.results = {**results, "eval": sort_rows(results["eval"])}
    trained = run.results  # whether a model learned is a fact of its training run's results
    if tag is not None:
        with contextlib.suppress(OSError, ValueError):
            own = load_results(run.path / results_name())
            trained = trained if schema_problems(own) else own
        if overrides := results.get("overrides"):  # the config as eval.py saw it
            from omegaconf import OmegaConf

            try:
                config = OmegaConf.create(run.config)
                merged = OmegaConf.merge(config, OmegaConf.from_dotlist(list(overrides)))
                run.config = OmegaConf.to_container(merged, resolve=True)
            except Exception as error:
                return run.fail(f"cannot apply the tag's overrides ({error})")
    run.config_hash = config_hash(run.config, near=run.path)
    run.id_accuracy = in_distribution_accuracy(trained)
    if run.id_accuracy is not None:
        run.learned = run.id_accuracy >= min_accuracy
    return run


def load_runs(
    folder: str | Path, tag: str | None, min_accuracy: float, reached_criterion: bool = False
) -> list[RunRecord]:
    """Every run directory below ``folder`` (sorted), then the directories with results*.json
    but no config.yaml (failed); duplicates marked; with ``reached_criterion``, runs whose
    criterion was not reached (or that had none) excluded. A run directory's own folders
    (``RUN_SUBFOLDERS``: wandb/ holds config.yaml files of its own) are not searched; hidden
    directories (.hydra/) are skipped."""
    if not (folder := Path(folder)).is_dir():
        raise FileNotFoundError(f"{folder}: not a directory")
    runs, orphans = [], []
    for root, dirs, files in os.walk(folder):
        dirs[:] = [d for d in dirs if not d.startswith(".")]
        run = RunRecord(Path(root), Path(root).relative_to(folder).as_posix())  # the folder: "."
        if CONFIG_NAME in files:
            runs.append(run)
            # not its wandb/ (config.yaml files of wandb's own), but a run made inside it
            # (hydra.run.dir=<run>/sub, a sweep into a run's folder) is found, not dropped
            dirs[:] = [d for d in dirs if d not in RUN_SUBFOLDERS]
        elif any(f.startswith("results.") and f.endswith(".json") for f in files):
            orphans.append(run.fail("results without config.yaml"))
    runs = [read_run(run, tag, min_accuracy) for run in sorted(runs, key=lambda r: r.path)]
    runs += sorted(orphans, key=lambda run: run.path)
    for run in runs:
        if reached_criterion and run.status == "ok" and not run.criterion.get("reached"):
            run.status = "excluded"
            run.reason = "criterion not reached" if run.criterion else "trained without a criterion"
    counted = {}  # (configuration, seed, data seed) -> the run counted: the first by name
    for run in sorted((r for r in runs if r.status == "ok"), key=lambda r: r.name):
        first = counted.setdefault((run.config_hash, *run.seed_key), run.name)
        if first != run.name:
            run.status = "duplicate"
            run.reason = f"same configuration and seed as {first}; not counted"
    return runs


def load_sweep(
    folder: str | Path, tag: str | None = None, *, min_accuracy: float = LEARNED_ACCURACY
) -> pd.DataFrame:
    """Every run below ``folder`` as a long pandas DataFrame, for notebooks: one row per run ×
    results row (a failed run: one row, result columns NaN); columns ``run_dir``, ``seed``,
    ``data_seed`` (the training stream's), ``status`` (as in runs.csv), ``reason``, ``config_hash``, ``criterion_reached`` and
    ``reached_at_step`` (None without a criterion), every ``config.yaml`` key dotted
    (``pe.name``; with ``tag``, the overrides applied), every results-row field (the schema's
    always). Nothing is averaged or dropped (docs/analysis.md)."""
    head_keys = ["run_dir", "seed", "data_seed", "status", "reason", "config_hash"]
    head_keys += ["criterion_reached", "reached_at_step"]
    records, config_keys, result_keys = [], {}, dict.fromkeys(ROW_KEYS)  # dicts: ordered sets
    for run in load_runs(folder, tag, min_accuracy):
        record = run.record
        head = {key: record[key] for key in head_keys}
        flat = {k: v for k, v in flatten(run.config or {}).items() if k not in head_keys}
        rows = run.results["eval"] if run.results else [{}]
        config_keys |= dict.fromkeys(flat)
        result_keys |= dict.fromkeys(key for row in rows for key in row)
        records += [{**head, **flat, **row} for row in rows]
    columns = dict.fromkeys(head_keys) | config_keys | result_keys
    return pd.DataFrame.from_records(records, columns=list(columns))
