"""Attention maps and mean attention distance of a trained model, at any length.

The model's attention layers call ``attend`` (``lengen.model.kernels``), which never forms the
softmax weights explicitly on its fast paths. ``record_attention`` swaps in a reference
implementation of the same function for one forward pass, under the name the layers call it by
(``lengen.model.attention.attend``): explicit logits (content · scale + the PE's bias + the
causal mask + CoPE's contextual term), softmax, weights @ v. It returns the weights of every
positional self-attention call; cross-attention (no PE) is not recorded.

Mean attention distance (as in ViT analyses, Dosovitskiy et al. 2021, on token offsets):
for query i, Σ_j w_ij · |i − j| in **token indices** (not position values, which differ under
randomized positions), averaged over queries and instances, per layer and head. A head that
looks at its neighbours scores ~1; a head spread uniformly over a causal prefix of n tokens
scores ~n/3 on average over queries.
"""

from __future__ import annotations

from contextlib import contextmanager
from pathlib import Path

import torch
from torch import Tensor

import lengen.model.attention as attention_module
from lengen.evaluation.attention import (
    attention_weights,
    layer_names,
    options_weights,
    own_attention_weights,
    weights_unavailable,
)
from lengen.model import block_options
from lengen.model.looped import last_loop

# MAX_MAP_LENGTH, the longest sequence whose (H, T, T) weights are formed, is defined with
# plot.py's pre-check of the run's config, which asks it before torch is imported
from lengen.preflight.attention_maps import MAX_MAP_LENGTH, map_size_refusal

#: layer_names lives with the weights (below this module's layer); it stays importable from here
__all__ = ["MAX_MAP_LENGTH", "analyse_run", "grid_attention_distance", "layer_names"]
__all__ += ["mean_attention_distance"]
__all__ += ["record_attention", "recording_attention", "reference_attend"]


def reference_attend(
    q: Tensor,
    k: Tensor,
    v: Tensor,
    *,
    causal: bool,
    pe=None,
    q_positions: Tensor | None = None,
    k_positions: Tensor | None = None,
    dropout_p: float = 0.0,
    **_kernel_options,
) -> tuple[Tensor, Tensor]:
    """Explicit softmax attention -> (output (B, H, Tq, hd), weights (B, H, Tq, Tk) fp32).

    The same function as ``attend`` (its docstring), written the textbook way; the weights come
    from ``lengen.evaluation.attention.attention_weights``, as the attention diagnostics' do."""
    weights = attention_weights(
        q, k, causal=causal, pe=pe, q_positions=q_positions, k_positions=k_positions
    )  # (B, H, Tq, Tk)
    return torch.matmul(weights.to(v.dtype), v), weights


@contextmanager
def recording_attention():
    """Within the block, every positional self-attention call appends its weights to the list
    this yields, in call order (stack by stack, layer by layer). Encodings that compute
    attention themselves keep their own kernel; their weights are formed from it with one-hot
    values (``own_attention_weights``), or the call is refused where they would be too many;
    so are those of layers whose block options change the weights (``options_weights``)."""
    recorded: list[Tensor] = []
    original = attention_module.attend

    def recording(q, k, v, **kwargs):
        pe = kwargs.get("pe")
        if pe is not None and pe.has_attention:
            reason = weights_unavailable(pe, q, k)
            if reason is not None:
                raise ValueError(f"length: {reason}")
            recorded.append(own_attention_weights(original, q, k, **kwargs).cpu())
            return original(q, k, v, **kwargs)
        output, weights = reference_attend(q, k, v, **kwargs)
        if pe is not None:
            recorded.append(weights.detach().cpu())
        return output

    original_options = block_options.attend_with_options

    def recording_options(q, k, v, extra, options, **kwargs):
        # block options that change the weights (sinks, key biases, sigmoid): their own path
        weights = options_weights(original_options, q, k, extra, options, kwargs)
        if isinstance(weights, str):
            raise ValueError(f"length: {weights}")
        recorded.append(weights.cpu())
        return original_options(q, k, v, extra, options, **kwargs)

    attention_module.attend = recording
    block_options.attend_with_options = recording_options
    try:
        yield recorded
    finally:
        attention_module.attend = original
        block_options.attend_with_options = original_options


@torch.no_grad()
def record_attention(model: torch.nn.Module, inputs: dict) -> list[Tensor]:
    """Weights of every positional self-attention layer for one batch -> [(B, H, Tq, Tk)]."""
    longest = max(t.shape[1] for name, t in inputs.items() if name != "positions")
    if longest > MAX_MAP_LENGTH:
        raise ValueError(
            f"length: attention maps are formed explicitly, up to {MAX_MAP_LENGTH} positions; "
            f"got {longest}"
        )
    was_training = model.training
    model.eval()
    try:
        with recording_attention() as recorded:
            model(**inputs)
    finally:
        model.train(was_training)
    return last_loop(model, recorded, longest)  # a looped model: its last loop's maps


def map_refusal(model: torch.nn.Module, inputs: dict, length: int, samples: int) -> str | None:
    """Why maps of ``samples`` instances at ``length`` (plot.py's ``--length``, ``--samples``)
    cannot be formed, naming the option to change and its largest allowed value; None when
    they can. ``inputs``: one instance's batch at that length."""
    from lengen.pe.base import PositionalEncoding

    tokens = max(t.shape[1] for name, t in inputs.items() if name != "positions")
    own = [m for m in model.modules() if isinstance(m, PositionalEncoding) and m.has_attention]
    if not own:
        return map_size_refusal(tokens, 0, None, length, samples)
    return map_size_refusal(tokens, own[0].n_heads, type(own[0]).__name__, length, samples)


def mean_attention_distance(weights: Tensor) -> Tensor:
    """weights (B, H, Tq, Tk), queries the last Tq of the Tk keys -> (H,) mean |i − j|."""
    q_len, k_len = weights.shape[-2:]
    query_index = torch.arange(q_len)[:, None] + (k_len - q_len)
    distance = (query_index - torch.arange(k_len)[None, :]).abs().float()  # (Tq, Tk)
    return (weights.float() * distance).sum(-1).mean(dim=(0, 2))


def grid_attention_distance(weights: Tensor, positions: Tensor) -> Tensor:
    """weights (B, H, Tq, Tk) of a grid run, positions (Tk, A) each token's cell (−1 on any axis:
    a readout slot, no cell) -> (H,) mean Euclidean distance in cells from a query's cell to the
    cells it attends to, over the queries that have a cell. The weight on readout slots is left
    out and the rest renormalised, so the distance is between cells only."""
    cells = (positions >= 0).all(-1)  # (Tk,)
    q_positions = positions[-weights.shape[-2] :]  # (Tq, A): the queries are the last Tq keys
    distance = torch.cdist(q_positions.double(), positions.double())  # (Tq, Tk) in cells
    on_cells = weights.double() * cells  # (B, H, Tq, Tk)
    on_cells = on_cells / on_cells.sum(-1, keepdim=True).clamp_min(1e-12)
    per_query = (on_cells * distance).sum(-1)  # (B, H, Tq)
    return per_query[..., cells[-weights.shape[-2] :]].mean(dim=(0, 2)).float()


def analyse_run(
    run_dir: str | Path,
    length: int,
    out_dir: str | Path | None = None,
    samples: int = 16,
    formats: tuple[str, ...] = ("png", "pdf"),
) -> dict:
    """Attention maps (first instance; every layer × head) and mean attention distance per
    layer × head (mean over ``samples`` held-out instances) of a run's checkpoint at one length.

    Writes attention_len<L>.json and the figures attention_maps_len<L>, attention_distance_len<L>
    into ``out_dir`` (default: the run directory) -> the report dict."""
    import json

    from lengen.api import load_run
    from lengen.atomic import atomic_write
    from lengen.config import ConfigError
    from lengen.data.task_data import TaskData, max_position
    from lengen.plots import plot_attention_distance, plot_attention_maps

    run_dir = Path(run_dir)
    out_dir = Path(out_dir) if out_dir is not None else run_dir
    from lengen.checkpoints import NonFiniteCheckpoint

    try:
        run = load_run(run_dir)
    except NonFiniteCheckpoint as error:  # blank maps of NaN weights said nothing (CK01b)
        raise ConfigError(f"run={run_dir}: {error.problem}") from None
    data, model = run.data, run.model
    if not isinstance(data, TaskData):
        raise ConfigError(f"run={run_dir}: attention maps are available for tasks only")
    # one instance tells the size of every call, before the asked-for many are drawn (G12: a
    # refusal after 29 s, naming the length for --samples 100000)
    probe = next(iter(data.eval_batches(length, 1, 1)))
    if (refusal := map_refusal(model, probe["inputs"], length, samples)) is not None:
        raise ConfigError(refusal)
    batch = next(iter(data.eval_batches(length, samples, samples)))
    recorded = record_attention(model, batch["inputs"])
    names = layer_names(model)
    positions = batch["inputs"].get("positions")  # grids: (T, A), each token's cell
    on_grid = positions is not None and positions.dim() == 2 and positions.shape[-1] >= 2
    if on_grid:  # distances between cells, not between flattened token indices
        distances = torch.stack([grid_attention_distance(w, positions) for w in recorded])
    else:
        distances = torch.stack([mean_attention_distance(w) for w in recorded])  # (layers, H)
    report = {
        "run": str(run_dir),
        "length": length,
        "train_len": data.train_len,
        "max_position": max_position(batch),  # grids: the extent along one axis
        "samples": int(batch["targets"].shape[0]),
        "layers": names,
        "mean_attention_distance": distances.tolist(),
        "distance_unit": "cells" if on_grid else "tokens",
        "paths": [],
    }

    stem = out_dir / f"attention_maps_len{length}"
    if on_grid and positions.shape[-1] == 2:  # per query, over the cells of the grid
        from lengen.plots.attention import plot_grid_attention_maps

        first = [weights[:1] for weights in recorded]  # the first instance
        report["paths"] += plot_grid_attention_maps(
            first, names, positions.cpu().numpy(), length, data.train_len, stem, formats
        )
    else:
        # tokens per layer at the training length (a decoder's copy instance of length L: 2L + 1)
        at_train = next(iter(data.eval_batches(data.train_len, 1, 1)))["inputs"]
        train_tokens = [weights.shape[-1] for weights in record_attention(model, at_train)]
        report["paths"] += plot_attention_maps(
            recorded, names, length, data.train_len, stem, formats,
            train_tokens=None if on_grid else train_tokens,
        )  # fmt: skip
    stem = out_dir / f"attention_distance_len{length}"
    report["paths"] += plot_attention_distance(report, distances, stem, formats)
    report["paths"] = [str(p) for p in report["paths"]]
    atomic_write(out_dir / f"attention_len{length}.json", json.dumps(report, indent=2) + "\n")
    return report
