"""Exactness by depth for tasks that locate their answer (passkey, associative recall).

``task.depth(inputs)`` says where each held-out instance hides its answer, as a fraction of the
input (0: the start, 1: the end); every task that defines it gets this report
(``TaskData.locates_answer``), in any model kind and layout. The same instances as the results
rows (fixed evaluation seed) are scored teacher-forced once more, and grouped into ``bins``
equal depth bins per length: ``accuracy_by_depth<tag>.json`` and a heatmap
``accuracy_by_depth<tag>.png`` (length × depth). Over seeds, per configuration: scripts/plot.py
(``lengen.aggregate.diagnostics``).
"""

from __future__ import annotations

import json
from pathlib import Path

import torch

from lengen.data.task_data import IGNORE


@torch.no_grad()
def depth_report(
    model: torch.nn.Module,
    data,
    lengths: list[int],
    *,
    samples: int,
    max_tokens_per_batch: int = 65536,
    bins: int = 5,
) -> dict:
    """Per length and depth bin: instances, per-token accuracy and exact match (teacher forced)."""
    was_training = model.training
    model.eval()
    device = next(model.parameters()).device
    task = data.task
    rows = []
    for length in sorted(set(lengths)):
        inputs = data.held_out_inputs(length, samples, data.eval_seed)  # (N, n) as evaluated
        which = (task.depth(inputs) * bins).long().clamp(0, bins - 1)  # (N,)
        batch_size = max(1, max_tokens_per_batch // data.sequence_length(length))
        correct_parts, scored_parts = [], []
        for batch in data.batches_of(inputs, batch_size):  # the task's own layout (grids too)
            logits = model(**{k: v.to(device) for k, v in batch["inputs"].items()})
            targets = batch["targets"].to(device)
            scored = targets != IGNORE  # (B, T)
            correct = (logits.argmax(-1) == targets) & scored
            correct_parts.append(correct.sum(-1).cpu())
            scored_parts.append(scored.sum(-1).cpu())
        correct, scored = torch.cat(correct_parts), torch.cat(scored_parts)  # (N,) each
        for index in range(bins):
            members = which == index
            count = int(members.sum())
            rows.append(
                {
                    "length": length,
                    "depth_bin": index,
                    "depth_low": index / bins,
                    "depth_high": (index + 1) / bins,
                    "n_examples": count,
                    "accuracy": (
                        float(correct[members].sum() / scored[members].sum()) if count else None
                    ),
                    "exact_match": (
                        float((correct[members] == scored[members]).float().mean())
                        if count
                        else None
                    ),
                }
            )
    model.train(was_training)
    return {
        "task": task.name,
        "protocol": "teacher_forced",
        "depth": "position of the answer in the input, 0 = start, 1 = end",
        "bins": bins,
        "train_lengths": [data.min_len, data.train_len],
        "rows": rows,
    }


def write_depth_report(report: dict, output_dir: Path, tag: str = "", settings=None) -> None:
    """``accuracy_by_depth<tag>.json`` and its heatmap, both written atomically; ``settings``:
    the run's ``eval`` node (its figure keys), None for the defaults."""
    from lengen.atomic import atomic_write
    from lengen.plots import plot_depth_heatmap
    from lengen.plots.common import figure_output
    from lengen.plots.guard import draw

    stem = f"accuracy_by_depth{tag}"  # tag: "" or ".<tag>" (eval.py)
    atomic_write(output_dir / f"{stem}.json", json.dumps(report, indent=2) + "\n")
    figures = figure_output(settings or {})
    png = output_dir / f"{stem}.png"  # and the .pdf beside it
    draw(png.name, plot_depth_heatmap, report, png, **figures)
