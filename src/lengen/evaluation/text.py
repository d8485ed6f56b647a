"""Language-model evaluation: perplexity per length on the validation stream of ``TextData``.

Two protocols (``eval.protocol``):

* ``nonoverlap`` — disjoint windows of length L, every token scored (Press et al., 2022, main
  results);
* ``sliding`` — windows advanced by ``eval.stride`` S, each scoring only its last S tokens (the
  first window scores all), so every scored token sees at least L − S tokens of context.

Both score exactly the same stretch: the first M targets of the validation stream (tokens 1..M;
M = ``eval.max_tokens`` or all), at every length. When the windows do not end exactly at M, one
last window of length L is aligned to end at M and scores only the tokens not yet scored; so
``nonoverlap`` is ``sliding`` with S = L, by construction. The loss by position in the window is
kept (``loss_by_position<tag>.json`` and its figure).
"""

from __future__ import annotations

import json
import math
from pathlib import Path

from lengen.data.text import TextData
from lengen.evaluation.tasks import raise_if_out_of_memory
from lengen.model.looped import loop_facts
from lengen.progress import as_mode, each

LOGITS_BUDGET = 1 << 26  # logits elements per evaluation batch (256 MiB in fp32)


def position_name(tag: str, suffix: str) -> str:
    return f"loss_by_position{tag}.{suffix}"


def window_plan(n_targets: int, length: int, stride: int):
    """Windows scoring exactly targets 1..n_targets of a stream -> (starts, first_scored).

    Window k reads tokens [starts[k], starts[k] + length) and predicts the next token at each
    position; it scores positions first_scored[k] … length − 1 of its own. Needs
    length <= n_targets and 1 <= stride <= length."""
    import numpy as np

    if not 1 <= stride <= length <= n_targets:
        raise ValueError(
            f"need 1 <= stride <= length <= n_targets, got {stride, length, n_targets}"
        )
    starts = np.arange(0, n_targets - length + 1, stride, dtype=np.int64)  # (W,)
    first = np.full(len(starts), length - stride, dtype=np.int64)
    first[0] = 0
    covered = int(starts[-1]) + length  # targets 1..covered are scored so far
    if covered < n_targets:  # one last window ending at n_targets scores the rest
        starts = np.append(starts, n_targets - length)
        first = np.append(first, length - (n_targets - covered))
    return starts, first


def evaluate_text(
    data: TextData,
    model,
    lengths,
    *,
    settings,
    output_dir=None,
    tag="",
    progress=True,
    report=None,
    on_row=None,
):
    """One row per length (perplexity, bits per byte), and the loss by position in the
    window written to ``loss_by_position<tag>.json`` / ``.png`` in ``output_dir``. Rows also
    carry ``seconds``, ``peak_mem_mb`` and ``batch_size`` (windows per batch, halved after
    an out-of-memory error). ``report`` (sections for results.json) receives nothing here: the
    loss by position has its own file."""
    from lengen.measure import measured_with_oom_halving

    protocol = settings.get("protocol", "nonoverlap")
    stride = settings.get("stride")
    max_tokens = settings.get("max_tokens")
    available = data.val_ids.shape[0] - 1  # targets 1..N-1 of the validation stream
    n_targets = available if max_tokens is None else min(max_tokens, available)
    rows, by_position = [], {}
    mode, label = as_mode(progress)
    lengths = each(sorted(set(lengths)), desc="evaluate", unit="length", mode=mode, label=label,
                   cost=lambda length: 1)  # every length scores the same targets  # fmt: skip
    for length in lengths:
        if length > n_targets:
            raise ValueError(
                f"eval.lengths: length {length} needs {length} scored tokens, but "
                f"{n_targets} are available (validation split and eval.max_tokens)"
            )
        step = length if protocol == "nonoverlap" else min(stride or length, length)
        device = next(model.parameters()).device
        try:
            (row, position), cost = measured_with_oom_halving(
                lambda windows, length=length, step=step: score_windows(
                    data, model, length, step, n_targets, windows, mode == "bar"
                ),
                windows_per_batch(data, length, settings.max_tokens_per_batch),
                device,
            )
        except Exception as error:
            raise_if_out_of_memory(error, length, rows, device)
            raise
        rows.append({**row, "protocol": protocol, "max_tokens": max_tokens, **cost})
        by_position[length] = position
        if on_row is not None:  # the rows so far (score_lengths' on_row)
            on_row(list(rows))
    if output_dir is not None:
        write_position_report(Path(output_dir), tag, by_position, rows, data.train_len, protocol,
                              settings)  # fmt: skip
    return rows


def windows_per_batch(data: TextData, length: int, max_tokens_per_batch: int) -> int:
    """Windows per batch within the token budget and the logits budget."""
    return max(1, min(max_tokens_per_batch // length, LOGITS_BUDGET // (length * data.vocab_size)))


def score_windows(data: TextData, model, length, stride, n_targets, per_batch, progress):
    """Score targets 1..n_targets with windows of ``length`` advanced by ``stride``,
    ``per_batch`` windows at a time."""
    import numpy as np
    import torch
    import torch.nn.functional as F
    from tqdm.auto import tqdm

    starts, first = window_plan(n_targets, length, stride)
    device = next(model.parameters()).device
    was_training = model.training
    model.eval()
    position_loss = torch.zeros(length, dtype=torch.float64)
    position_count = torch.zeros(length, dtype=torch.float64)
    scored_bytes = 0
    offsets = torch.arange(length)
    with torch.no_grad():
        for begin in tqdm(
            range(0, len(starts), per_batch),
            desc=f"evaluate {length}",
            unit="batch",
            disable=not progress,
        ):
            chunk = starts[begin : begin + per_batch]
            batch = data.windows(data.val_ids, chunk, length)
            scored = offsets[None, :] >= torch.from_numpy(first[begin : begin + per_batch])[:, None]
            logits = model(tokens=batch["inputs"]["tokens"].to(device))  # (B, L, V)
            nll = (
                F.cross_entropy(
                    logits.float().flatten(0, 1),
                    batch["targets"].to(device).flatten(),
                    reduction="none",
                )
                .view(len(chunk), length)
                .double()
                .cpu()
            )  # (B, L)
            nll = torch.where(scored, nll, 0.0)
            position_loss += nll.sum(0)
            position_count += scored.sum(0)
            target_index = chunk[:, None] + 1 + np.arange(length)  # (B, L) stream indices
            scored_bytes += int(data.val_bytes[target_index][scored.numpy()].sum())
    model.train(was_training)
    total = float(position_loss.sum())
    tokens = int(position_count.sum())
    loss = total / tokens
    row = {
        "length": length,
        "in_distribution": length <= data.train_len,
        "max_position": data.max_position(length),
        **loop_facts(model, length),  # looped depth: K(T) at windows of ``length`` tokens
        "stride": stride,
        "n_examples": len(starts),
        "tokens_scored": tokens,
        "bytes_scored": scored_bytes,
        "loss": loss,
        "ppl": math.exp(loss) if loss < 700 else math.inf,
        "bits_per_byte": total / math.log(2) / scored_bytes if scored_bytes else None,
        "accuracy": None,
        "exact_match": None,
    }
    mean = (position_loss / position_count.clamp(min=1)).tolist()
    return row, {"loss": mean, "count": position_count.long().tolist()}


def write_position_report(
    output_dir: Path, tag, by_position, rows, train_len, protocol, settings=None
) -> None:
    """``loss_by_position<tag>.json`` (mean loss and count per window position, per length)
    and its plot. Position p is the (p+1)-th token of a window: it sees p tokens of context."""
    from lengen.atomic import atomic_write
    from lengen.plots import plot_loss_by_position
    from lengen.plots.common import figure_output
    from lengen.plots.guard import draw

    strides = {row["length"]: row["stride"] for row in rows}
    report = {
        "protocol": protocol,
        "train_len": train_len,
        "note": "position p of a window predicts its token from p tokens of context; "
        "loss is the mean over scored tokens at that position, count how many were scored",
        "lengths": {
            str(length): {
                "stride": strides[length],
                "loss": [round(v, 5) for v in values["loss"]],
                "count": values["count"],
            }
            for length, values in by_position.items()
        },
    }
    atomic_write(output_dir / position_name(tag, "json"), json.dumps(report) + "\n")
    figures = figure_output(settings or {})  # the run's eval.plot_dpi / plot_formats
    png = output_dir / position_name(tag, "png")
    draw(png.name, plot_loss_by_position, report, png, **figures)
