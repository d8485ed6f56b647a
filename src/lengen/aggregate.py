"""Aggregate a sweep folder into one table: mean, sample std and 95% CI over training seeds.

``python scripts/aggregate.py <folder>`` calls :func:`aggregate` then :func:`write_outputs`;
``scripts/plot.py`` reuses the same :class:`Summary`. No torch here (fast to import).

Rules (docs/analysis.md explains them for users):

* **Run directory**: a directory below the folder holding ``config.yaml`` (hidden directories
  such as ``.hydra/`` and everything inside a run directory are not searched). Its
  ``results.json`` is the run's result; missing or unreadable → listed as failed, never dropped.
  A directory with ``results*.json`` but no ``config.yaml`` is listed as failed too.
* **Configuration**: a hash of the whole resolved ``config.yaml`` except :data:`IGNORED_KEYS`
  (the seed, and keys that cannot change a result: logging, progress output, evaluation batch
  size, the list of evaluation lengths, which is a row key). Runs with different hashes are
  never averaged together. ``init_from`` (a path) is replaced by the hash of the run it points
  to when that run's ``config.yaml`` can be found, so fine-tunes of seed-specific base runs
  still group; otherwise the path itself enters the hash.
* **Re-evaluations** (``results.<tag>.json`` from ``eval.py``) are not mixed with
  ``results.json``: by default they are counted and listed, not aggregated; ``tag=...``
  aggregates ``results.<tag>.json`` instead, with the overrides recorded in that file applied
  to the run's config before hashing (so, e.g., a YaRN re-evaluation is its own configuration).
* **Statistics** per (configuration, length, protocol): mean, sample std (ddof = 1), 95% CI
  mean ± t_{0.975, n−1}·std/√n (Student t); n = 1 → std and CI are None. ``best_of_seeds`` is
  the best value over seeds (max for accuracy / exact match, min for loss / ppl).
* **Not learned**: per-token accuracy at the training length (in distribution) below
  ``min_accuracy``. Such runs stay in the statistics and are counted in ``n_not_learned``,
  unless ``exclude_not_learned`` (then they are left out and still counted there).
* **Duplicates**: two runs of one configuration with the same seed; the first (by path) is kept,
  the others listed and not counted (they are not independent samples).
* **Ranking**: within each comparison (same config apart from the PE, same length beyond
  training, same protocol) PEs are ranked by mean metric (ties share the average rank); a PE's
  score is the mean of 1/rank over the comparisons it takes part in (mean reciprocal rank).
"""

from __future__ import annotations

import contextlib
import csv
import hashlib
import io
import json
import math
import os
import sys
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path

from lengen.results import (
    CONFIG_NAME,
    LM_FALLBACK_METRIC,
    METRIC_DIRECTIONS,
    load_results,
    result_tags,
    results_name,
    schema_problems,
    sort_rows,
)

#: dotted config keys (and whole subtrees) left out of the configuration hash
IGNORED_KEYS = (
    "seed",  # what we average over
    "hydra",  # where the run wrote (train.py already drops it from config.yaml)
    "logger",  # csv / wandb / none: where training curves go
    "resume",  # a resumed run replays the same batches (every batch is a function of seed, step)
    "trainer.enable_progress_bar",
    "trainer.enable_model_summary",
    "trainer.log_every_n_steps",
    "eval.lengths",  # the length is a row key; runs evaluated at more lengths still group
    "eval.factors",
    "eval.max_tokens_per_batch",  # evaluation batch size: memory, not the instances
)
#: columns shown by name; the other keys that distinguish configurations go into ``settings``
NAMED_KEYS = ("pe.name", "data.name", "model.name", "data.len")
CI_LEVEL = 0.95
CI_METHOD = "95% CI, Student t, n−1 degrees of freedom: mean ± t_{0.975, n−1} · std / √n"
SUMMARY_COLUMNS = (
    "config_hash",
    "pe",
    "task",
    "model",
    "train_len",
    "settings",
    "protocol",
    "length",
    "in_distribution",
    "metric",
    "n_seeds",
    "seeds",
    "mean",
    "std",
    "ci95_low",
    "ci95_high",
    "best_of_seeds",
    "n_not_learned",
    "n_examples",
    "chance_accuracy",
)
RANKING_COLUMNS = (
    "scope",
    "position",
    "pe",
    "mrr",
    "mean_rank",
    "n_comparisons",
    "n_best",
)
RUN_COLUMNS = (
    "run_dir",
    "status",
    "reason",
    "config_hash",
    "pe",
    "task",
    "model",
    "train_len",
    "seed",
    "id_accuracy",
)


# -- Student t ---------------------------------------------------------------------------------
def _beta_continued_fraction(a: float, b: float, x: float) -> float:
    """Continued fraction of the incomplete beta function (modified Lentz's method)."""
    tiny = 1e-300
    c, d = 1.0, 1.0 - (a + b) * x / (a + 1.0)
    d = 1.0 / (d if abs(d) > tiny else tiny)
    result = d
    for m in range(1, 1000):
        for numerator in (
            m * (b - m) * x / ((a + 2 * m - 1) * (a + 2 * m)),
            -(a + m) * (a + b + m) * x / ((a + 2 * m) * (a + 2 * m + 1)),
        ):
            d = 1.0 + numerator * d
            d = 1.0 / (d if abs(d) > tiny else tiny)
            c = 1.0 + numerator / c
            c = c if abs(c) > tiny else tiny
            result *= d * c
        if abs(d * c - 1.0) < 1e-15:
            break
    return result


def regularized_incomplete_beta(a: float, b: float, x: float) -> float:
    """I_x(a, b) for a, b > 0 and x in [0, 1]."""
    if x <= 0.0:
        return 0.0
    if x >= 1.0:
        return 1.0
    log_front = (
        math.lgamma(a + b) - math.lgamma(a) - math.lgamma(b) + a * math.log(x) + b * math.log1p(-x)
    )
    if x < (a + 1.0) / (a + b + 2.0):
        return math.exp(log_front) * _beta_continued_fraction(a, b, x) / a
    return 1.0 - math.exp(log_front) * _beta_continued_fraction(b, a, 1.0 - x) / b


def t_upper_tail(t: float, df: float) -> float:
    """P(T > t) for Student's t with ``df`` degrees of freedom (``math.inf``: the normal)."""
    if math.isinf(df):
        return 0.5 * math.erfc(t / math.sqrt(2.0))
    tail = 0.5 * regularized_incomplete_beta(df / 2.0, 0.5, df / (df + t * t))
    return tail if t >= 0 else 1.0 - tail


def t_quantile(p: float, df: float) -> float:
    """The p-quantile of Student's t (e.g. t_quantile(0.975, 9) = 2.2622), by bisection on
    the CDF written with the regularized incomplete beta function; df = math.inf gives the
    standard normal."""
    if not 0.0 < p < 1.0:
        raise ValueError(f"p must be in (0, 1), got {p}")
    if not df > 0:
        raise ValueError(f"degrees of freedom must be > 0, got {df}")
    if p < 0.5:
        return -t_quantile(1.0 - p, df)
    if p == 0.5:
        return 0.0
    target = 1.0 - p
    low, high = 0.0, 1.0
    while t_upper_tail(high, df) > target:
        low, high = high, 2.0 * high
    for _ in range(200):
        middle = 0.5 * (low + high)
        if t_upper_tail(middle, df) > target:
            low = middle
        else:
            high = middle
        if high - low <= 1e-13 * high:
            break
    return 0.5 * (low + high)


def describe(values: list[float], higher_is_better: bool = True) -> dict:
    """n, mean, sample std (ddof=1), 95% t-interval and best value of a list of seed values.

    n = 0: everything None; n = 1: std and CI None (one seed says nothing about the spread).
    """
    n = len(values)
    stats = {"n": n, "mean": None, "std": None, "ci95_low": None, "ci95_high": None}
    stats["best_of_seeds"] = None
    if n == 0:
        return stats
    mean = math.fsum(values) / n
    stats["mean"] = mean
    stats["best_of_seeds"] = max(values) if higher_is_better else min(values)
    if n >= 2:
        std = math.sqrt(math.fsum((v - mean) ** 2 for v in values) / (n - 1))
        half_width = t_quantile(0.5 + CI_LEVEL / 2, n - 1) * std / math.sqrt(n)
        stats.update(std=std, ci95_low=mean - half_width, ci95_high=mean + half_width)
    return stats


# -- configurations ----------------------------------------------------------------------------
def flatten(tree: dict, prefix: str = "") -> dict:
    """{'a': {'b': 1}} -> {'a.b': 1}; lists stay values."""
    flat = {}
    for key, value in tree.items():
        dotted = f"{prefix}{key}"
        if isinstance(value, dict) and value:
            flat.update(flatten(value, dotted + "."))
        else:
            flat[dotted] = value
    return flat


def _ignored(dotted: str, ignored: tuple[str, ...]) -> bool:
    return any(dotted == key or dotted.startswith(key + ".") for key in ignored)


def identity(config: dict, ignored: tuple[str, ...] = IGNORED_KEYS, *, _depth: int = 0) -> dict:
    """The flat config that identifies a configuration: ignored keys dropped, null keys dropped
    (a key an older lengen did not write means the same as null: unset), ``init_from`` replaced
    by the identity hash of the run it points to where that run can be found."""
    flat = {k: v for k, v in flatten(config).items() if v is not None and not _ignored(k, ignored)}
    if flat.get("init_from"):
        flat["init_from"] = _init_from_identity(str(flat["init_from"]), _depth)
    return flat


def _init_from_identity(value: str, depth: int) -> str:
    path = Path(value)
    candidates = [path] if path.is_dir() else [path.parent, path.parent.parent]
    for run_dir in candidates:
        config_path = run_dir / CONFIG_NAME
        if depth < 8 and config_path.is_file():
            try:
                config = read_config(config_path)
            except (OSError, ValueError):
                break
            return "run:" + config_hash(config, _depth=depth + 1)
    return value


def config_hash(config: dict, ignored: tuple[str, ...] = IGNORED_KEYS, *, _depth: int = 0) -> str:
    """sha256 (hex) of the canonical JSON of :func:`identity`."""
    canonical = json.dumps(
        identity(config, ignored, _depth=_depth), sort_keys=True, separators=(",", ":"), default=str
    )
    return hashlib.sha256(canonical.encode()).hexdigest()


def read_config(path: Path) -> dict:
    import yaml

    with open(path) as handle:
        config = yaml.safe_load(handle)
    if not isinstance(config, dict):
        raise ValueError(f"{path.name} is not a mapping")
    return config


def apply_overrides(config: dict, overrides: list[str]) -> dict:
    """The config as ``eval.py`` saw it: ``key=value`` overrides merged in (OmegaConf rules)."""
    if not overrides:
        return config
    from omegaconf import OmegaConf

    merged = OmegaConf.merge(OmegaConf.create(config), OmegaConf.from_dotlist(list(overrides)))
    return OmegaConf.to_container(merged, resolve=True)


# -- runs --------------------------------------------------------------------------------------
@dataclass
class Run:
    """One run directory and what became of it."""

    path: Path
    name: str  # relative to the folder, for display
    status: str = "ok"  # ok | failed | duplicate
    reason: str = ""
    config: dict | None = None
    results: dict | None = None
    config_hash: str | None = None
    id_accuracy: float | None = None  # accuracy at the training length, in distribution
    learned: bool | None = None  # None: could not be checked (no accuracy at the train length)

    def describe(self) -> dict:
        """pe, task, model, train_len, seed from results.json, else from config.yaml."""
        if self.results is not None:
            source = self.results
            return {key: source.get(key) for key in ("pe", "task", "model", "train_len", "seed")}
        config = self.config or {}

        def get(*keys):
            node = config
            for key in keys:
                node = node.get(key) if isinstance(node, dict) else None
            return node

        return {
            "pe": get("pe", "name"),
            "task": get("data", "name"),
            "model": get("model", "name"),
            "train_len": get("data", "len"),
            "seed": get("seed"),
        }


def find_run_dirs(folder: Path) -> tuple[list[Path], list[Path]]:
    """(run directories, directories with results*.json but no config.yaml), sorted.

    A run directory is not searched further (its .hydra/ and wandb/ hold config.yaml files of
    their own); hidden directories are skipped."""
    runs, orphans = [], []
    for root, dirs, files in os.walk(folder):
        dirs[:] = sorted(d for d in dirs if not d.startswith("."))
        if CONFIG_NAME in files:
            runs.append(Path(root))
            dirs[:] = []
        elif any(f.startswith("results.") and f.endswith(".json") for f in files):
            orphans.append(Path(root))
    return sorted(runs), sorted(orphans)


def in_distribution_accuracy(results: dict) -> float | None:
    """Per-token accuracy at the training length (teacher-forced when present); without a row
    at the training length, the longest in-distribution row; None where no accuracy exists."""
    rows = [r for r in results["eval"] if r.get("accuracy") is not None]
    at_train = [r for r in rows if r["length"] == results["train_len"]]
    if not at_train:
        in_dist = [r for r in rows if r.get("in_distribution")]
        longest = max((r["length"] for r in in_dist), default=None)
        at_train = [r for r in in_dist if r["length"] == longest]
    if not at_train:
        return None
    at_train.sort(key=lambda r: (r["protocol"] != "teacher_forced", r["protocol"]))
    return float(at_train[0]["accuracy"])


def load_run(path: Path, folder: Path, tag: str | None, min_accuracy: float) -> Run:
    name = path.relative_to(folder).as_posix() if path != folder else "."
    run = Run(path=path, name=name)
    try:
        run.config = read_config(path / CONFIG_NAME)
    except Exception as error:  # yaml errors, unreadable files: report, never crash
        run.status, run.reason = "failed", f"unreadable config.yaml ({type(error).__name__})"
        return run
    results_path = path / results_name(tag)
    if not results_path.is_file():
        run.status = "failed"
        run.reason = f"no {results_path.name} (failed, unfinished or still running)"
        failure = path / "failed.json"  # written by a run that failed (lengen.cli)
        if failure.is_file():
            with contextlib.suppress(OSError, ValueError, KeyError):
                run.reason = f"failed: {json.loads(failure.read_text())['error']}"
        return run
    try:
        results = load_results(results_path)
    except Exception as error:
        run.status, run.reason = "failed", f"unreadable {results_path.name} ({error})"
        return run
    problems = schema_problems(results)
    if problems:
        run.status = "failed"
        run.reason = f"{results_path.name} does not follow the schema: {'; '.join(problems[:3])}"
        return run
    if not results["eval"]:
        run.status, run.reason = "failed", f"{results_path.name} has no evaluation rows"
        return run
    run.results = {**results, "eval": sort_rows(results["eval"])}
    config = run.config
    if tag is not None:
        try:
            config = apply_overrides(config, results.get("overrides") or [])
        except Exception as error:
            run.status, run.reason = "failed", f"cannot apply the tag's overrides ({error})"
            return run
        run.config = config
    run.config_hash = config_hash(config)
    run.id_accuracy = in_distribution_accuracy(_trained_results(path, tag) or run.results)
    if run.id_accuracy is not None:
        run.learned = run.id_accuracy >= min_accuracy
    return run


def _trained_results(path: Path, tag: str | None) -> dict | None:
    """For a re-evaluation, the run's own results.json: whether the model learned is a fact of
    the training run (a re-evaluation may not include the training length)."""
    if tag is None:
        return None
    try:
        results = load_results(path / results_name())
    except (OSError, ValueError):
        return None
    return results if not schema_problems(results) else None


# -- aggregation -------------------------------------------------------------------------------
@dataclass
class Summary:
    """Everything the reports and figures need."""

    folder: Path
    metric: str
    min_accuracy: float
    exclude_not_learned: bool
    tag: str | None
    runs: list[Run]
    rows: list[dict] = field(default_factory=list)
    ranking: list[dict] = field(default_factory=list)
    ignored_tag_files: list[str] = field(default_factory=list)

    @property
    def failed(self) -> list[Run]:
        return [run for run in self.runs if run.status == "failed"]

    @property
    def duplicates(self) -> list[Run]:
        return [run for run in self.runs if run.status == "duplicate"]

    @property
    def not_learned(self) -> list[Run]:
        return [run for run in self.runs if run.status == "ok" and run.learned is False]

    @property
    def aggregated(self) -> list[Run]:
        return [run for run in self.runs if run.status == "ok"]


def row_metric(row: dict, metric: str) -> str | None:
    """The metric a results row is summarised by: ``metric``, or ppl on language-modelling rows
    when a task metric (accuracy, exact match) was asked for and is null there."""
    if row.get(metric) is not None:
        return metric
    if METRIC_DIRECTIONS.get(metric) and row.get(LM_FALLBACK_METRIC) is not None:
        return LM_FALLBACK_METRIC
    return None


#: Config subtrees that belong to one named component (key prefix -> the key naming it): their
#: keys are compared among configurations of the same component, so a RoPE row is not labelled
#: with keys ALiBi lacks, nor a copy row with addition's ``data.task.base``.
COMPONENTS = {"pe.": "pe.name", "data.task.": "data.name"}


def _component(key: str) -> str | None:
    return next((prefix for prefix in COMPONENTS if key.startswith(prefix)), None)


def settings_by_hash(runs: list[Run]) -> dict[str, list[tuple[str, str]]]:
    """For each configuration, the (key, value) pairs that set it apart, sorted by key.

    A key counts when it varies anywhere in the folder, except the keys of one component only
    (``pe.base`` of RoPE, ``data.task.base`` of addition; ``COMPONENTS``): those count when
    they vary among configurations of that component, so RoPE rows are not labelled with keys
    ALiBi lacks. Options every PE has (``pe.randomized``) count like any other key. The named
    columns (pe, task, model, train_len) are left out."""
    configs = {}
    for run in runs:
        if run.config_hash is not None and run.config_hash not in configs:
            configs[run.config_hash] = identity(run.config)
    if not configs:
        return {}
    shared = set.intersection(*(set(flat) for flat in configs.values()))

    def folder_wide(key: str) -> bool:
        prefix = _component(key)
        # a component's class follows its name; its other keys count folder-wide when all have them
        return prefix is None or (
            key in shared and key.removeprefix(prefix) not in ("_target_", "_partial_")
        )

    varying = _varying_keys(list(configs.values()), folder_wide)
    within = {}  # (prefix, component name) -> keys varying among that component's configs
    for prefix, name_key in COMPONENTS.items():
        groups = defaultdict(list)
        for flat in configs.values():
            groups[flat.get(name_key)].append(flat)
        for name, group in groups.items():
            within[prefix, name] = _varying_keys(
                group, lambda key, prefix=prefix: _component(key) == prefix and not folder_wide(key)
            )
    settings = {}
    for digest, flat in configs.items():
        keys = set(varying)
        for prefix, name_key in COMPONENTS.items():
            keys |= within[prefix, flat.get(name_key)]
        settings[digest] = [
            (key, _show(flat.get(key, "null"))) for key in sorted(keys) if key not in NAMED_KEYS
        ]
    return settings


def join_settings(pairs: list[tuple[str, str]]) -> str:
    return ", ".join(f"{key}={value}" for key, value in pairs)


def _varying_keys(configs: list[dict], keep) -> set[str]:
    keys = {key for flat in configs for key in flat if keep(key)}
    missing = object()
    return {
        key
        for key in keys
        if len({json.dumps(flat.get(key, missing), default=str) for flat in configs}) > 1
    }


def _show(value) -> str:
    return value if isinstance(value, str) else json.dumps(value, separators=(",", ":"))


def aggregate(
    folder: str | Path,
    *,
    metric: str = "accuracy",
    min_accuracy: float = 0.9,
    exclude_not_learned: bool = False,
    tag: str | None = None,
) -> Summary:
    """Find, load, group and summarise every run below ``folder`` (see the module docstring)."""
    if metric not in METRIC_DIRECTIONS:
        raise ValueError(f"metric must be one of {', '.join(METRIC_DIRECTIONS)}; got {metric!r}")
    if not 0.0 <= min_accuracy <= 1.0:
        raise ValueError(f"min_accuracy must be in [0, 1], got {min_accuracy}")
    folder = Path(folder)
    if not folder.is_dir():
        raise FileNotFoundError(f"{folder}: not a directory")
    run_dirs, orphans = find_run_dirs(folder)
    runs = [load_run(path, folder, tag, min_accuracy) for path in run_dirs]
    for path in orphans:
        name = path.relative_to(folder).as_posix() if path != folder else "."
        runs.append(
            Run(path=path, name=name, status="failed", reason="results without config.yaml")
        )
    _mark_duplicates(runs)
    summary = Summary(folder, metric, min_accuracy, exclude_not_learned, tag, runs)
    if tag is None:
        summary.ignored_tag_files = [
            f"{run.name}/{results_name(t)}" for run in runs for t in result_tags(run.path)
        ]
    summary.rows = _summary_rows(summary)
    summary.ranking = rank_pes(summary.rows)
    return summary


def _mark_duplicates(runs: list[Run]) -> None:
    seen = {}
    for run in sorted((r for r in runs if r.status == "ok"), key=lambda r: r.name):
        key = (run.config_hash, run.results["seed"])
        if key in seen:
            run.status = "duplicate"
            run.reason = f"same configuration and seed as {seen[key]}; not counted"
        else:
            seen[key] = run.name


def _summary_rows(summary: Summary) -> list[dict]:
    runs = summary.aggregated
    settings = settings_by_hash(runs)
    cells = defaultdict(list)  # (hash, length, protocol) -> [(run, row)]
    for run in runs:
        for row in run.results["eval"]:
            cells[(run.config_hash, row["length"], row["protocol"])].append((run, row))
    out = []
    for (digest, length, protocol), members in cells.items():
        first_run, first_row = members[0]
        metric = next(
            (m for _, row in members if (m := row_metric(row, summary.metric))), summary.metric
        )
        used = [
            (run, row)
            for run, row in members
            if row.get(metric) is not None
            and not (summary.exclude_not_learned and run.learned is False)
        ]
        used.sort(key=lambda item: item[0].results["seed"])
        stats = describe([float(row[metric]) for _, row in used], METRIC_DIRECTIONS[metric])
        chances = {row.get("chance_accuracy") for _, row in members} - {None}
        out.append(
            {
                "config_hash": digest[:10],
                "pe": first_run.results["pe"],
                "task": first_run.results["task"],
                "model": first_run.results["model"],
                "train_len": first_run.results["train_len"],
                "settings": join_settings(settings[digest]),
                "_pe_settings": join_settings(
                    [s for s in settings[digest] if s[0].startswith("pe.")]
                ),
                "protocol": protocol,
                "length": length,
                "in_distribution": bool(first_row.get("in_distribution")),
                "metric": metric,
                "n_seeds": stats["n"],
                "seeds": " ".join(str(run.results["seed"]) for run, _ in used),
                "mean": stats["mean"],
                "std": stats["std"],
                "ci95_low": stats["ci95_low"],
                "ci95_high": stats["ci95_high"],
                "best_of_seeds": stats["best_of_seeds"],
                "n_not_learned": sum(run.learned is False for run, _ in members),
                "n_examples": min((row["n_examples"] for _, row in members), default=None),
                "chance_accuracy": chances.pop() if len(chances) == 1 else None,
                "_hash": digest,
                "_language_modelling": all(row.get("accuracy") is None for _, row in members),
                "_rank_hash": config_hash(first_run.config, (*IGNORED_KEYS, "pe")),
            }
        )
    out.sort(
        key=lambda r: (
            str(r["task"]),
            str(r["model"]),
            r["train_len"],
            r["protocol"],
            str(r["pe"]),
            r["settings"],
            r["length"],
        )
    )
    return out


# -- ranking -----------------------------------------------------------------------------------
def average_ranks(values: list[float], higher_is_better: bool = True) -> list[float]:
    """Rank 1 = best; equal values share the mean of the ranks they span; NaN ranks last."""

    def key(index):
        value = values[index]
        if math.isnan(value):
            return (1, 0.0)
        rounded = float(f"{value:.12g}")  # equal up to float noise of the mean
        return (0, -rounded if higher_is_better else rounded)

    order = sorted(range(len(values)), key=key)
    ranks = [0.0] * len(values)
    start = 0
    while start < len(order):
        stop = start
        while stop + 1 < len(order) and key(order[stop + 1]) == key(order[start]):
            stop += 1
        for position in range(start, stop + 1):
            ranks[order[position]] = (start + stop) / 2 + 1
        start = stop + 1
    return ranks


def pe_labels(rows: list[dict]) -> dict[str, str]:
    """Display name of each configuration's PE: its name, plus its ``pe.*`` settings when the
    folder holds several variants of that PE (so RoPE base 500 and base 10⁴ rank apart)."""
    labels = {}
    for row in rows:
        pe_settings = row["_pe_settings"]
        labels[row["_hash"]] = str(row["pe"]) + (f" ({pe_settings})" if pe_settings else "")
    return labels


def rank_pes(rows: list[dict]) -> list[dict]:
    """Mean reciprocal rank of each PE, over all tasks ('all') and, when there are several
    tasks, per task ('task=<name>').

    A comparison is one (configuration without its PE, length beyond training, protocol,
    metric) holding at least two PEs with a mean; within it PEs are ranked by mean (ties
    share the average rank) and each PE scores 1/rank. MRR = mean score over the comparisons
    a PE takes part in."""
    labels = pe_labels(rows)
    comparisons = defaultdict(list)
    for row in rows:
        if row["in_distribution"] or row["mean"] is None:
            continue
        key = (row["task"], row["_rank_hash"], row["length"], row["protocol"], row["metric"])
        comparisons[key].append(row)
    comparisons = {key: members for key, members in comparisons.items() if len(members) >= 2}
    several_tasks = len({task for task, *_ in comparisons}) > 1
    scores = defaultdict(list)  # (scope, label) -> [rank, …]
    for (task, *_), members in comparisons.items():
        metric = members[0]["metric"]
        ranks = average_ranks([m["mean"] for m in members], METRIC_DIRECTIONS[metric])
        for member, rank in zip(members, ranks, strict=True):
            for scope in ("all", f"task={task}") if several_tasks else ("all",):
                scores[(scope, labels[member["_hash"]])].append(rank)
    table = []
    for (scope, label), ranks in scores.items():
        table.append(
            {
                "scope": scope,
                "pe": label,
                "mrr": math.fsum(1.0 / rank for rank in ranks) / len(ranks),
                "mean_rank": math.fsum(ranks) / len(ranks),
                "n_comparisons": len(ranks),
                "n_best": sum(rank < 2 for rank in ranks),  # first place, shared or not
            }
        )
    table.sort(key=lambda r: (r["scope"] != "all", r["scope"], -r["mrr"], r["pe"]))
    position, previous_scope = 0, None
    for entry in table:
        position = position + 1 if entry["scope"] == previous_scope else 1
        entry["position"], previous_scope = position, entry["scope"]
    return table


# -- writing -----------------------------------------------------------------------------------
def _csv(rows: list[dict], columns: tuple[str, ...]) -> str:
    buffer = io.StringIO()
    writer = csv.DictWriter(buffer, fieldnames=columns, extrasaction="ignore", lineterminator="\n")
    writer.writeheader()
    for row in rows:
        writer.writerow({k: ("" if row.get(k) is None else row.get(k)) for k in columns})
    return buffer.getvalue()


def _suffixed(name: str, tag: str | None) -> str:
    stem, dot, ext = name.rpartition(".")
    return name if tag is None else f"{stem}.{tag}{dot}{ext}"


def run_table(summary: Summary) -> list[dict]:
    return [
        {
            "run_dir": run.name,
            "status": "not_learned" if run.status == "ok" and run.learned is False else run.status,
            "reason": run.reason,
            "config_hash": (run.config_hash or "")[:10],
            "id_accuracy": run.id_accuracy,
            **run.describe(),
        }
        for run in summary.runs
    ]


def write_outputs(summary: Summary, out_dir: str | Path | None = None) -> list[Path]:
    """summary.csv, summary.md, ranking.csv, failed.csv and runs.csv (``.<tag>`` inserted
    before the extension with a tag), written atomically; returns the paths."""
    from lengen.results import atomic_write_text

    out_dir = Path(out_dir or summary.folder)
    runs = run_table(summary)
    files = {
        "summary.csv": _csv(summary.rows, SUMMARY_COLUMNS),
        "summary.md": format_markdown(summary),
        "ranking.csv": _csv(summary.ranking, RANKING_COLUMNS),
        "failed.csv": _csv([r for r in runs if r["status"] == "failed"], RUN_COLUMNS),
        "runs.csv": _csv(runs, RUN_COLUMNS),
    }
    paths = []
    for name, text in files.items():
        path = out_dir / _suffixed(name, summary.tag)
        atomic_write_text(path, text)
        paths.append(path)
    return paths


def warnings_for(summary: Summary) -> list[str]:
    """One line per problem a user must see (printed on stderr by the CLI)."""
    lines = []
    if not summary.runs:
        lines.append(f"no run directories (holding {CONFIG_NAME}) below {summary.folder}")
    if summary.failed:
        lines.append(
            f"{len(summary.failed)} failed or missing run(s), listed in summary.md and failed.csv: "
            + ", ".join(run.name for run in summary.failed[:5])
            + (" …" if len(summary.failed) > 5 else "")
        )
    if summary.duplicates:
        lines.append(
            f"{len(summary.duplicates)} duplicate run(s) (same config and seed) not counted"
        )
    if summary.not_learned:
        verb = "excluded" if summary.exclude_not_learned else "kept in the statistics, flagged"
        lines.append(f"{len(summary.not_learned)} run(s) did not learn in distribution ({verb})")
    return lines


def _fmt(value, metric: str) -> str:
    if value is None:
        return "–"
    if isinstance(value, float) and not math.isfinite(value):
        return str(value)
    return f"{value:.3f}" if metric in ("accuracy", "exact_match") else f"{value:.4g}"


def _cell(row: dict) -> str:
    if row["n_seeds"] == 0:
        return "–"
    text = _fmt(row["mean"], row["metric"])
    if row["n_seeds"] == 1:
        text += " (n=1)"
    else:
        text += f" ± {_fmt(row['ci95_high'] - row['mean'], row['metric'])}"
    return text + (" †" if row["n_not_learned"] else "")


def _md_table(header: list[str], body: list[list]) -> list[str]:
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(str(c).replace("|", "\\|") for c in row) + " |" for row in body]
    return lines


def format_markdown(summary: Summary) -> str:
    """The human-readable report: settings, tables of mean ± CI, ranking, flags, failures."""
    metric = summary.metric
    fallback = f" ({LM_FALLBACK_METRIC} on language-modelling rows, where {metric} is null)"
    lines = [
        f"# Results summary: `{summary.folder}`",
        "",
        "## Settings",
        "",
        f"- Metric: `{metric}`{fallback if METRIC_DIRECTIONS[metric] else ''}; "
        f"source files: `{results_name(summary.tag)}`.",
        f"- Statistics over training seeds per configuration × length × protocol: mean, sample "
        f"standard deviation (ddof = 1) and the {CI_METHOD}. Tables show mean ± CI half-width. "
        "With one seed (n=1) there is no std and no CI. CIs are not clipped to [0, 1]. They "
        "describe variation over training seeds on the fixed evaluation set, not the sampling "
        "error of that set (`n_examples` per length in summary.csv).",
        "- `best_of_seeds` (summary.csv): the best seed (max for accuracy / exact match, min for "
        "loss / ppl), for comparison with papers that report maxima; not an estimate of "
        "expected performance.",
        "- Configuration = hash of the resolved config.yaml without "
        + ", ".join(f"`{k}`" for k in IGNORED_KEYS)
        + "; runs that differ in anything else are never averaged together. Keys that set "
        "configurations apart are listed under *settings*.",
        f"- Not learned: per-token accuracy at the training length < {summary.min_accuracy:g}. "
        + (
            "Such runs are **excluded** from the statistics (n counts the others)."
            if summary.exclude_not_learned
            else "Such runs are **kept** in the statistics and marked †."
        ),
        f"- Runs: {len(summary.runs)} found, {len(summary.aggregated)} aggregated, "
        f"{len(summary.failed)} failed or missing, {len(summary.duplicates)} duplicates not "
        f"counted, {len(summary.not_learned)} did not learn.",
    ]
    if summary.ignored_tag_files:
        lines.append(
            f"- {len(summary.ignored_tag_files)} re-evaluation file(s) (`results.<tag>.json`) "
            "not included; aggregate one tag with `--tag <tag>` (listed below)."
        )
    lines += ["", f"## Results ({metric}: mean ± 95% CI half-width)", ""]
    panels = defaultdict(list)
    for row in summary.rows:
        panels[(row["task"], row["model"], row["train_len"], row["protocol"])].append(row)
    for (task, model, train_len, protocol), rows in panels.items():
        lengths = sorted({r["length"] for r in rows})
        in_dist = {r["length"] for r in rows if r["in_distribution"]}
        metrics = sorted({r["metric"] for r in rows})
        header = ["pe", "settings", "n"]
        for length in lengths:
            factor = length / train_len if train_len else None
            note = f"{factor:g}×" if factor else ""
            note += ", in-dist" if length in in_dist else ""
            header.append(f"{length} ({note})" if note else str(length))
        by_config = defaultdict(dict)
        for r in rows:
            by_config[(r["pe"], r["settings"], r["config_hash"])][r["length"]] = r
        body = []
        for (pe, settings, _), cells in by_config.items():
            counts = sorted({c["n_seeds"] for c in cells.values()})
            n = str(counts[0]) if len(counts) == 1 else f"{counts[0]}–{counts[-1]}"
            body.append(
                [pe, settings or "–", n, *(_cell(cells[x]) if x in cells else "" for x in lengths)]
            )
        lines += [
            f"### {task} · {model} · train_len {train_len} · {protocol} · {', '.join(metrics)}",
            "",
        ]
        lines += [*_md_table(header, body), ""]
    if any(r["n_not_learned"] for r in summary.rows):
        lines += ["† includes runs that did not learn in distribution (see below).", ""]
    lines += [
        "## Ranking of positional encodings (mean reciprocal rank)",
        "",
        "Within each comparison (same configuration apart from the PE, one length beyond the "
        "training length, one protocol) PEs are ranked by mean metric, ties sharing the average "
        "rank; a PE's MRR is the mean of 1/rank over its comparisons (1 = always best). "
        "Comparisons with a single PE are skipped. `n_best`: first places, shared ones included.",
        "",
    ]
    scopes = defaultdict(list)
    for entry in summary.ranking:
        scopes[entry["scope"]].append(entry)
    if not scopes:
        lines += ["No comparison with two or more PEs beyond the training length.", ""]
    for scope, entries in scopes.items():
        lines += [f"### {'all tasks' if scope == 'all' else scope}", ""]
        body = [
            [
                e["position"],
                e["pe"],
                f"{e['mrr']:.3f}",
                f"{e['mean_rank']:.2f}",
                e["n_comparisons"],
                e["n_best"],
            ]
            for e in entries
        ]
        lines += _md_table(["#", "pe", "MRR", "mean rank", "comparisons", "n_best"], body)
        lines.append("")
    lines += [f"## Runs that did not learn in distribution (accuracy < {summary.min_accuracy:g})"]
    lines.append("")
    if summary.not_learned:
        body = [
            [r.name, *(r.describe()[k] for k in ("pe", "task", "model", "train_len", "seed"))]
            + [f"{r.id_accuracy:.3f}"]
            for r in summary.not_learned
        ]
        header = ["run", "pe", "task", "model", "train_len", "seed", "accuracy at train_len"]
        lines += [*_md_table(header, body), ""]
    else:
        lines += ["None.", ""]
    unchecked = [r for r in summary.aggregated if r.learned is None]
    if unchecked:
        lines += [
            f"Not checked (no accuracy at the training length, e.g. language modelling): "
            f"{len(unchecked)} run(s).",
            "",
        ]
    lines += ["## Failed or missing runs", ""]
    if summary.failed:
        body = [
            [r.name, *(r.describe()[k] for k in ("pe", "task", "seed")), r.reason]
            for r in summary.failed
        ]
        lines += [*_md_table(["run", "pe", "task", "seed", "reason"], body), ""]
    else:
        lines += ["None.", ""]
    if summary.duplicates:
        lines += ["## Duplicate runs (not counted)", ""]
        lines += [*_md_table(["run", "reason"], [[r.name, r.reason] for r in summary.duplicates])]
        lines.append("")
    if summary.ignored_tag_files:
        lines += ["## Re-evaluation files not included", ""]
        lines += [f"- `{name}`" for name in summary.ignored_tag_files]
        lines.append("")
    return "\n".join(lines)


def add_selection_arguments(parser) -> None:
    """The options aggregate.py and plot.py share: which metric, runs and result files."""
    parser.add_argument(
        "--metric",
        default="accuracy",
        choices=list(METRIC_DIRECTIONS),
        help="metric to summarise (default accuracy; ppl is used on language-modelling rows "
        "where accuracy / exact_match are null)",
    )
    parser.add_argument(
        "--min-accuracy",
        type=float,
        default=0.9,
        help="flag runs whose accuracy at the training length is below this (default 0.9)",
    )
    parser.add_argument(
        "--exclude-not-learned",
        action="store_true",
        help="leave flagged runs out of the statistics (default: keep and flag them)",
    )
    parser.add_argument(
        "--tag",
        default=None,
        help="aggregate the re-evaluations results.<tag>.json instead of results.json "
        "(outputs get .<tag> before their extension)",
    )


def summary_from_arguments(args) -> Summary | None:
    """Aggregate ``args.folder`` as the shared options say; None (message printed) on bad input."""
    try:
        return aggregate(
            args.folder,
            metric=args.metric,
            min_accuracy=args.min_accuracy,
            exclude_not_learned=args.exclude_not_learned,
            tag=args.tag,
        )
    except (ValueError, FileNotFoundError) as error:
        print(f"error: {error}", file=sys.stderr)
        return None


def main(argv: list[str] | None = None) -> int:
    """The CLI behind scripts/aggregate.py."""
    import argparse

    parser = argparse.ArgumentParser(
        prog="aggregate.py",
        description="Summarise a sweep folder: summary.csv, summary.md, ranking.csv, "
        "failed.csv, runs.csv (mean ± 95%% CI over seeds). See docs/analysis.md.",
    )
    parser.add_argument("folder", type=Path, help="a sweep folder (searched recursively)")
    add_selection_arguments(parser)
    args = parser.parse_args(argv)
    summary = summary_from_arguments(args)
    if summary is None:
        return 2
    paths = write_outputs(summary)
    for line in warnings_for(summary):
        print(f"warning: {line}", file=sys.stderr)
    print(
        f"{len(summary.aggregated)} run(s) in {len({r['_hash'] for r in summary.rows})} "
        f"configuration(s) -> " + ", ".join(str(p) for p in paths)
    )
    return 0
