"""A run's own figures drawn again from the files it wrote (``plot.py runs <folder>``).

A run writes each figure beside the numbers it shows: ``extrapolation.png`` from
``results.json``, ``attention_diagnostics.png`` / ``_distance.png`` and
``accuracy_by_position.png`` from sections of ``results.json``, ``accuracy_by_depth.png`` from
``accuracy_by_depth.json``, ``loss_by_position.png`` from ``loss_by_position.json`` (and the
same with ``.<tag>`` for eval.py's re-evaluations). The committed reproduction folders keep the
numbers and leave the figures out of git (.gitignore); this draws them again, with the run's
``eval.plot_dpi`` / ``eval.plot_formats`` from its ``config.yaml``.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

from lengen.plots.attention import plot_attention_diagnostics
from lengen.plots.common import figure_output
from lengen.plots.run import (
    plot_depth_heatmap,
    plot_extrapolation,
    plot_loss_by_position,
    plot_position_heatmap,
)

#: results.json or results.<tag>.json -> group 1: "" or ".<tag>"
_RESULTS = re.compile(r"results(\.[^/]+)?\.json")


def run_folders(folder: Path) -> list[Path]:
    """Every run directory at or below ``folder`` (one with ``config.yaml`` and a results
    file), sorted; hidden folders (.hydra, .jobs) are skipped."""
    candidates = [folder, *(path for path in folder.rglob("*") if path.is_dir())]
    return sorted(
        path
        for path in candidates
        if not any(part.startswith(".") for part in path.relative_to(folder).parts)
        and (path / "config.yaml").is_file()
        and any(_RESULTS.fullmatch(item.name) for item in path.glob("results*.json"))
    )


def _drawable(results: dict, key: str, path: Path) -> dict:
    """``results[key]`` where its figure can be drawn from it, else {} with one warning line
    naming the file and the part (a NaN where a list belongs ended ``plot.py runs`` in a
    TypeError traceback: PL05b); the run's other figures are drawn all the same."""
    import sys

    from lengen.section_shapes import SHAPES

    section = results.get(key) or {}
    if not isinstance(section, dict):
        problem = f"{key} is {type(section).__name__}, not an object"
    elif (part := SHAPES[key](section)) is None:
        return section
    else:
        problem = f"{key}.{part}"
    print(f"warning: {path}: {problem}; its figure is not drawn", file=sys.stderr)
    return {}


def redraw_run(run_dir: Path) -> list[Path]:
    """Draw ``run_dir``'s figures again from its json files -> the paths written."""
    import yaml

    config = yaml.safe_load((run_dir / "config.yaml").read_text()) or {}
    figures = figure_output(config.get("eval") or {})
    paths: list[Path] = []
    for results_path in sorted(run_dir.glob("results*.json")):
        if (match := _RESULTS.fullmatch(results_path.name)) is None:
            continue
        tag = match.group(1) or ""  # "" for train.py's results, ".<tag>" for eval.py's
        results = json.loads(results_path.read_text())
        paths += plot_extrapolation(results, run_dir / f"extrapolation{tag}.png", **figures)
        diagnostics = _drawable(results, "attention_diagnostics", results_path)
        if diagnostics.get("lengths"):
            stem = run_dir / f"attention_diagnostics{tag}"
            paths += plot_attention_diagnostics(diagnostics, stem, **figures)
        positions = _drawable(results, "accuracy_by_answer_position", results_path)
        if positions.get("protocols"):
            stem = run_dir / f"accuracy_by_position{tag}"
            paths += plot_position_heatmap(positions, stem, **figures)
        for name, plot in (
            ("accuracy_by_depth", plot_depth_heatmap),
            ("loss_by_position", plot_loss_by_position),
        ):
            if (report_path := run_dir / f"{name}{tag}.json").is_file():
                report = json.loads(report_path.read_text())
                paths += plot(report, run_dir / f"{name}{tag}.png", **figures)
    return paths
