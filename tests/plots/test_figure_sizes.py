"""The saved size of every figure kind against docs/analysis.md's *Figure sizes*: each is drawn
from small constructed inputs, saved at 200 dpi as PNG only (the PDF beside it is
tests/plots/test_run_figures.py's), and its PNG header read. Line figures and the
heatmaps of one run are a page wide (``FIGURE_WIDTH``, 6.4 in, plus the saved margin); the
PE × setup heatmap grows with its columns up to 12 in."""

from __future__ import annotations

import struct
from pathlib import Path

import pytest

from helpers import load_script
from lengen.plots.attention import plot_attention_diagnostics
from lengen.plots.common import FIGURE_WIDTH
from lengen.plots.pe import plot_pe_analysis
from lengen.plots.run import plot_extrapolation, plot_loss_by_position, plot_position_heatmap
from sweep_fixture import write_run

pytestmark = pytest.mark.usefixtures("single_thread")
DPI = 200
PNG = ("png",)
#: bbox_inches="tight" keeps a margin of up to 0.1 in a side around what was drawn
PAGE_PX = round((FIGURE_WIDTH + 0.2) * DPI)


def png_width(path: Path) -> int:
    header = path.read_bytes()[:24]  # signature (8), IHDR length + type (8), width, height
    assert header[:8] == b"\x89PNG\r\n\x1a\n"
    return struct.unpack(">II", header[16:24])[0]


def task_results() -> dict:
    rows = [{"length": n, "accuracy": a, "exact_match": a / 2, "loss": 1.0, "ppl": None,
             "chance_accuracy": 0.1, "baseline_accuracy": 0.2, "baseline_exact_match": 0.0}
            for n, a in ((8, 0.9), (16, 0.6), (32, 0.3))]  # fmt: skip
    return {"eval": rows, "train_len": 8, "label": "copy · decoder · pe=rope · seed 0"}


def loss_report() -> dict:
    lengths = {str(n): {"stride": n, "loss": [3.0] * n, "count": [4] * n} for n in (16, 64)}
    return {"protocol": "nonoverlap", "train_len": 16, "lengths": lengths}


def diagnostics_section(layers: int = 4, heads: int = 4) -> dict:
    """An ``attention_diagnostics`` section of a run's size: 4 layers of 4 heads, 10 distance
    buckets, training length 16, evaluated at 16 … 128."""
    buckets = ["0", "1", *(f"{2**k}–{2 ** (k + 1) - 1}" for k in range(1, 9))]
    stats = {"entropy": [1.0] * heads, "entropy_normalized": [0.5] * heads,
             "max_weight": [0.4] * heads, "sink_mass": [0.1] * heads,
             "bucket_mass": [[0.1] * len(buckets)] * heads}  # fmt: skip
    names = [str(layer) for layer in range(layers)]
    lengths = {str(n): {"tokens": 2 * n + 1, "layers": dict.fromkeys(names, stats)}
               for n in (16, 32, 64, 128)}  # fmt: skip
    return {"samples": 4, "layers": names, "train_len": 16, "lengths": lengths,
            "buckets": buckets, "statistics": list(stats), "skipped": []}  # fmt: skip


def position_section() -> dict:
    """Accuracy by answer position at lengths 16 … 128, training length 16."""
    by_length = {str(n): {"accuracy": [0.5] * n, "scored": 8, "bin_width": 1}
                 for n in (16, 32, 64, 128)}  # fmt: skip
    return {"train_len": 16, "protocols": {"teacher_forced": by_length, "greedy": by_length}}


def write_diagnosed_sweep(folder: Path) -> None:
    """Two seeds of ALiBi whose results carry attention diagnostics."""
    for seed in (0, 1):
        write_run(folder, f"alibi_s{seed}", seed=seed, accuracy={16: 1.0, 32: 0.5},
                  overrides={"data.len": 16},
                  extra={"attention_diagnostics": diagnostics_section()})  # fmt: skip


def attention_maps(out: Path):
    """``plot.py attention``'s maps of 2 layers × 4 heads at 32 tokens, and a 4×4 grid's."""
    import torch

    from lengen.data.layout import grid_coordinates
    from lengen.plots.attention import plot_attention_maps, plot_grid_attention_maps

    weights = torch.softmax(torch.randn(1, 4, 32, 32), dim=-1)  # (B, H, T, T)
    paths = plot_attention_maps(
        [weights] * 2, ["0", "1"], 32, 8, out / "maps", formats=PNG, train_tokens=17
    )
    cells = torch.softmax(torch.randn(1, 4, 16, 16), dim=-1)
    grid = grid_coordinates((4, 4))  # (16, 2)
    return paths + plot_grid_attention_maps(
        [cells], ["0"], grid, 4, 2, out / "grid_maps", formats=PNG
    )


RUN_FIGURES = {
    "attention_maps": attention_maps,
    "extrapolation": lambda out: plot_extrapolation(
        task_results(), out / "extrapolation.png", formats=PNG
    ),
    "loss_by_position": lambda out: plot_loss_by_position(
        loss_report(), out / "loss.png", formats=PNG
    ),
    "accuracy_by_position": lambda out: plot_position_heatmap(
        position_section(), out / "pos", formats=PNG
    ),
    "attention_diagnostics": lambda out: plot_attention_diagnostics(
        diagnostics_section(), out / "diag", formats=PNG
    ),
}


@pytest.mark.parametrize("kind", sorted(RUN_FIGURES))
def test_a_runs_figure_is_a_page_wide(tmp_path, kind):
    paths = [path for path in RUN_FIGURES[kind](tmp_path) if path.suffix == ".png"]
    assert paths and all(png_width(path) <= PAGE_PX for path in paths), [
        (path.name, png_width(path)) for path in paths
    ]


@pytest.fixture(scope="module")
def sweep_figures(tmp_path_factory) -> dict[str, int]:
    """scripts/plot.py on a sweep with attention diagnostics and two tasks -> {file: width}."""
    folder = tmp_path_factory.mktemp("sizes") / "sweep"
    write_diagnosed_sweep(folder)
    write_run(
        folder, "alibi_reverse", accuracy={4: 0.9, 8: 0.4}, overrides={"data.name": "reverse"}
    )
    assert load_script("plot").main([str(folder)]) == 0
    return {path.name: png_width(path) for path in folder.glob("*.png")}


@pytest.mark.parametrize("kind", ["extrapolation_", "attention_diagnostics_"])
def test_a_sweeps_line_figure_is_a_page_wide(sweep_figures, kind):
    widths = {name: width for name, width in sweep_figures.items() if name.startswith(kind)}
    assert widths and max(widths.values()) <= PAGE_PX, widths


def test_the_sweep_heatmap_is_at_most_12_inches_wide(sweep_figures):
    assert sweep_figures["heatmap_exact_match.png"] <= round(12.2 * DPI)


def test_the_pe_analysis_figures_are_a_page_wide(tmp_path):
    # plot.py pe-analysis --length 32 --dim 16 draws these (tests/plots/test_pe.py runs it)
    plot_pe_analysis(tmp_path, "all", length=32, dim=16, formats=PNG)
    widths = {path.name: png_width(path) for path in tmp_path.glob("*.png")}
    assert len(widths) >= 5 and max(widths.values()) <= PAGE_PX, widths
