"""The only code that knows the results.json schema (see DESIGN.md), and atomic writing."""

from __future__ import annotations

import json
import math
import os
import platform
import subprocess
import sys
import tempfile
from pathlib import Path

_UMASK = os.umask(0)
os.umask(_UMASK)
REQUIRED_KEYS = (
    "pe",
    "model",
    "task",
    "train_len",
    "seed",
    "n_params",
    "train_tokens",
    "provenance",
    "eval",
)
ROW_KEYS = (
    "length",
    "in_distribution",
    "max_position",
    "protocol",
    "n_examples",
    "loss",
    "accuracy",
    "exact_match",
    "ppl",
)


def atomic_write_text(path: str | Path, text: str) -> None:
    """Write to a temporary name in the same folder, then rename over the target."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w") as handle:
            handle.write(text)
        os.chmod(tmp, 0o666 & ~_UMASK)  # mkstemp makes 0600; give the usual file mode
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def git_commit() -> str:
    """HEAD of the lengen checkout (with ``-dirty`` for uncommitted changes), or 'unknown'."""
    root = Path(__file__).resolve().parents[2]
    try:
        commit = subprocess.run(
            ["git", "rev-parse", "HEAD"],
            cwd=root,
            capture_output=True,
            text=True,
            timeout=10,
            check=True,
        ).stdout.strip()
        dirty = subprocess.run(
            ["git", "status", "--porcelain", "--untracked-files=no"],
            cwd=root,
            capture_output=True,
            text=True,
            timeout=10,
        ).stdout.strip()
        return commit + ("-dirty" if dirty else "")
    except (OSError, subprocess.SubprocessError):
        return "unknown"


def provenance(device: str) -> dict:
    import torch

    from lengen import __version__

    return {
        "git_commit": git_commit(),
        "lengen": __version__,
        "torch": torch.__version__.split("+")[0],
        "python": platform.python_version(),
        "device": device,
        "command": " ".join([Path(sys.argv[0]).name, *sys.argv[1:]]),
        "overrides": hydra_overrides(),
    }


def hydra_overrides() -> list[str] | None:
    """This job's own overrides under Hydra (one job of a sweep, not the sweep's command)."""
    from hydra.core.hydra_config import HydraConfig

    return list(HydraConfig.get().overrides.task) if HydraConfig.initialized() else None


def build_results(
    cfg, model, data, rows: list[dict], *, train_tokens: int, device: str, extra: dict | None = None
) -> dict:
    """The results dictionary of a run (or a re-evaluation) from its config and model."""
    stacks = {name: m.pe for name, m in model.named_children() if hasattr(m, "pe")}
    described = {name: {**pe.describe(), **pe.describe_options()} for name, pe in stacks.items()}
    # one stack: its encoding's facts; encoder–decoder: per stack (T5's bucket mode differs)
    pe_info = next(iter(described.values())) if len(described) == 1 else described
    return {
        "pe": cfg.pe.name,
        "model": cfg.model.name,
        "task": cfg.data.name,
        "train_len": cfg.data.len,
        "seed": cfg.seed,
        "n_params": sum(p.numel() for p in model.parameters()),
        "train_tokens": train_tokens,
        "position_blind": model.position_blind,
        "pe_info": pe_info,
        "data": data.describe(),
        "eval_settings": {
            "lengths": [row["length"] for row in rows],
            "samples": cfg.eval.samples,
            "seed": cfg.eval.seed,
            "decoding": cfg.eval.decoding,
        },
        **(extra or {}),
        "provenance": provenance(device),
        "eval": sort_rows(rows),
    }


def sort_rows(rows: list[dict]) -> list[dict]:
    """Rows unique per (length, protocol), sorted by length."""
    seen = {}
    for row in rows:
        seen[(row["length"], row["protocol"])] = row
    return [seen[key] for key in sorted(seen)]


def write_results(path: str | Path, results: dict) -> None:
    missing = [key for key in REQUIRED_KEYS if key not in results]
    if missing:
        raise KeyError(f"results lack required keys: {missing}")
    results = {**results, "eval": sort_rows(results["eval"])}
    atomic_write_text(path, json.dumps(_strict(results), indent=2, allow_nan=False) + "\n")


def _strict(value):
    """Non-finite floats (an overflowing perplexity, a diverged loss) as null, so results.json
    stays strict JSON that every parser reads (json.dumps would write Infinity / NaN)."""
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {key: _strict(item) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [_strict(item) for item in value]
    return value


def load_results(path: str | Path) -> dict:
    return json.loads(Path(path).read_text())


def format_table(rows: list[dict], train_len: int | None = None) -> str:
    """A plain-text per-length table for the terminal (language modelling: ppl and bits/byte)."""
    if any(row.get("ppl") is not None for row in rows):
        return _format_lm_table(rows)
    header = f"{'length':>8} {'in-dist':>7} {'max_pos':>8} {'n':>6} {'loss':>9} {'accuracy':>9} {'exact':>7}"
    lines = [header, "-" * len(header)]
    for row in rows:

        def fmt(value, width, digits):
            return f"{value:>{width}.{digits}f}" if value is not None else f"{'-':>{width}}"

        lines.append(
            f"{row['length']:>8} {('yes' if row['in_distribution'] else 'no'):>7} "
            f"{row['max_position']:>8} {row['n_examples']:>6} {fmt(row['loss'], 9, 4)} "
            f"{fmt(row['accuracy'], 9, 4)} {fmt(row['exact_match'], 7, 3)}"
        )
    return "\n".join(lines)


def _format_lm_table(rows: list[dict]) -> str:
    header = f"{'length':>8} {'in-dist':>7} {'protocol':>10} {'stride':>6} {'tokens':>8} {'loss':>8} {'ppl':>10} {'bpb':>7}"
    lines = [header, "-" * len(header)]
    for row in rows:
        bpb = row.get("bits_per_byte")
        lines.append(
            f"{row['length']:>8} {('yes' if row['in_distribution'] else 'no'):>7} "
            f"{row['protocol']:>10} {row.get('stride') or '-':>6} {row.get('tokens_scored', 0):>8} "
            f"{row['loss']:>8.4f} {row['ppl']:>10.3f} {bpb if bpb is None else f'{bpb:.4f}':>7}"
        )
    return "\n".join(lines)


# -- reading runs back (scripts/aggregate.py, scripts/plot.py) ---------------------------------
RESULTS_NAME = "results.json"
CONFIG_NAME = "config.yaml"
#: metrics a results row may carry, and whether a larger value is better
METRIC_DIRECTIONS = {
    "accuracy": True,
    "exact_match": True,
    "loss": False,
    "ppl": False,
    "bits_per_byte": False,
}
#: what a task metric falls back to on language-modelling rows (where it is null)
LM_FALLBACK_METRIC = "ppl"


def results_name(tag: str | None = None) -> str:
    """``results.json``, or ``results.<tag>.json`` for an ``eval.py`` re-evaluation."""
    return RESULTS_NAME if tag is None else f"results.{tag}.json"


def result_tags(run_dir: str | Path) -> list[str]:
    """Tags of the re-evaluation files (``results.<tag>.json``) in a run directory, sorted."""
    names = (p.name for p in Path(run_dir).glob("results.*.json"))
    return sorted(name[len("results.") : -len(".json")] for name in names)


def schema_problems(results) -> list[str]:
    """What makes a loaded results.json unusable: missing keys, malformed rows ([] if none)."""
    if not isinstance(results, dict):
        return [f"not a JSON object but {type(results).__name__}"]
    problems = [f"missing key {key!r}" for key in REQUIRED_KEYS if key not in results]
    rows = results.get("eval")
    if "eval" in results and not isinstance(rows, list):
        problems.append("'eval' is not a list")
    elif isinstance(rows, list):
        for index, row in enumerate(rows):
            if not isinstance(row, dict):
                problems.append(f"eval[{index}] is not an object")
                continue
            missing = [key for key in ROW_KEYS if key not in row]
            if missing:
                problems.append(f"eval[{index}] lacks {missing}")
    return problems
