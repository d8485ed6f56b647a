"""``plot.py runs <folder>``: a run's own figures drawn again from the json files it wrote, so
the committed reproductions can leave them out of git (docs/reproductions.md)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from helpers import ROOT, compose_train
from sweep_fixture import write_run

FIGURES = (".png", ".pdf", ".svg")
#: accuracy_by_depth.json and loss_by_position.json as the evaluation writes them, two lengths
DEPTH = {"task": "passkey", "protocol": "teacher_forced", "bins": 2, "train_lengths": [4, 8],
         "rows": [{"length": n, "depth_bin": b, "exact_match": 0.5, "accuracy": 1.0}
                  for n in (8, 16) for b in range(2)]}  # fmt: skip
LOSS = {
    "protocol": "nonoverlap",
    "train_len": 8,
    "lengths": {str(n): {"stride": n, "loss": [3.0] * n, "count": [32] * n} for n in (8, 16)},
}


def plot_runs(folder: Path) -> subprocess.CompletedProcess:
    command = [sys.executable, str(ROOT / "scripts" / "plot.py"), "runs", str(folder)]
    return subprocess.run(command, capture_output=True, text=True, timeout=300)


def pixels(path: Path) -> np.ndarray:
    from PIL import Image

    return np.asarray(Image.open(path).convert("RGB"))


@pytest.fixture(scope="module")
def redrawn(tmp_path_factory) -> tuple[Path, dict[str, np.ndarray]]:
    """A tiny trained run whose figures were deleted and drawn again by ``plot.py runs`` on
    its parent folder -> (run directory, {name: pixels} of the figures the run itself drew)."""
    from lengen.train import run

    torch = pytest.importorskip("torch")
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        run_dir = tmp_path_factory.mktemp("redraw") / "sweep" / "run"
        cfg = compose_train("data.len=4", "eval.lengths=[4,8]", "model.d_model=32",
                            "eval.plot_dpi=40")  # fmt: skip
        run(cfg, run_dir=run_dir)
    finally:
        torch.set_num_threads(threads)
    drawn = {p.name: pixels(p) for p in run_dir.iterdir() if p.suffix == ".png"}
    for path in run_dir.iterdir():
        if path.suffix in FIGURES:
            path.unlink()
    done = plot_runs(run_dir.parent)
    assert done.returncode == 0, done.stderr
    return run_dir, drawn


def test_every_figure_of_the_run_is_drawn_again(redrawn):
    run_dir, drawn = redrawn
    assert {"extrapolation.png", "accuracy_by_position.png", "attention_diagnostics.png"} <= set(
        drawn
    )
    assert {p.name for p in run_dir.iterdir() if p.suffix == ".png"} == set(drawn)


def test_the_figures_drawn_again_are_the_runs_own_pixel_for_pixel(redrawn):
    # the run's eval.plot_dpi (40 here, not the default 200) comes from its config.yaml
    run_dir, drawn = redrawn
    for name, image in drawn.items():
        np.testing.assert_array_equal(pixels(run_dir / name), image, err_msg=name)


def test_a_tagged_evaluation_gets_its_figures_under_its_tag(tmp_path):
    run_dir = write_run(
        tmp_path, "run", accuracy={4: 0.9, 8: 0.4}, results_file="results.yarn.json"
    )
    (run_dir / "accuracy_by_depth.yarn.json").write_text(json.dumps(DEPTH))
    (run_dir / "loss_by_position.yarn.json").write_text(json.dumps(LOSS))
    done = plot_runs(tmp_path)
    assert done.returncode == 0, done.stderr
    names = {p.name for p in run_dir.iterdir() if p.suffix == ".png"}
    assert names == {
        "extrapolation.yarn.png",
        "accuracy_by_depth.yarn.png",
        "loss_by_position.yarn.png",
    }


def test_a_folder_without_runs_is_refused_with_nothing_written(tmp_path):
    (tmp_path / "notes.txt").write_text("no run here\n")
    done = plot_runs(tmp_path)
    assert done.returncode == 2
    assert done.stderr.startswith(f"error: {tmp_path}: no run directory")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["notes.txt"]
