"""How a task's input and answer symbols are laid out for a model: tokens, positions, targets.

Token layout (one vocabulary for every kind): PAD, BOS, SEP, SLOT, then the task's symbols.

Sequences (``format_batch``), by model kind:

* ``decoder``: ``BOS x1…xn SEP y1…ym`` shifted for next-token prediction; only the answer
  tokens y are scored.
* ``encoder`` (Chomsky-hierarchy style answer slots): ``x1…xn SEP SLOT×m``; the answer is read
  at the m slots, bidirectionally.
* ``encoder_decoder``: source ``x1…xn``; target ``BOS y1…y(m−1)`` predicting ``y1…ym``.

A sequence task may give its tokens their positions (``sequence_positions``: position coupling,
Abacus): ``inputs["positions"]`` (T,), shared by the batch's rows, for ``decoder`` and
``encoder``.

Grids and volumes (``format_grid``, encoder only): the cells, flattened row-major, are the
tokens; ``inputs["positions"]`` (T, A) holds each token's grid coordinate (axis 0 first), shared
by every row of the batch. Answers are read at the cells themselves (dense: one answer per
cell) or at readout slots after the cells, whose position row is all −1 (no grid position: every
encoding gives them no positional signal, as RoPE-ViT leaves the class token unrotated).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from lengen.data.source import IGNORE
from lengen.lazy import torch

if TYPE_CHECKING:
    from torch import Tensor

PAD, BOS, SEP, SLOT = 0, 1, 2, 3
N_SPECIAL = 4
MODEL_KINDS = ("decoder", "encoder", "encoder_decoder")


def format_batch(inputs: Tensor, answers: Tensor, model_kind: str) -> dict:
    """inputs (B, n), answers (B, m) as symbols -> {"inputs": {...}, "targets": (B, T)}."""
    batch_size, n = inputs.shape
    x, y = inputs + N_SPECIAL, answers + N_SPECIAL

    def column(token: int, width: int = 1) -> Tensor:
        return torch.full((batch_size, width), token, dtype=torch.long)

    if model_kind == "decoder":
        sequence = torch.cat([column(BOS), x, column(SEP), y], dim=1)  # (B, n+m+2)
        targets = sequence[:, 1:].clone()  # (B, n+m+1)
        targets[:, : n + 1] = IGNORE  # the prompt is given, not predicted
        return {"inputs": {"tokens": sequence[:, :-1]}, "targets": targets}
    if model_kind == "encoder":
        m = y.shape[1]
        tokens = torch.cat([x, column(SEP), column(SLOT, m)], dim=1)  # (B, n+1+m)
        targets = torch.cat([column(IGNORE, n + 1), y], dim=1)
        return {"inputs": {"tokens": tokens}, "targets": targets}
    if model_kind == "encoder_decoder":
        target_in = torch.cat([column(BOS), y[:, :-1]], dim=1)  # (B, m)
        return {"inputs": {"src": x, "tgt": target_in}, "targets": y}
    raise ValueError(f"model kind must be one of {', '.join(MODEL_KINDS)}; got {model_kind!r}")


def tokens(n: int, m: int, model_kind: str) -> int:
    """Tokens the model processes for n input and m answer symbols: the widths
    ``format_batch`` builds, as arithmetic (sizes without building a batch, or torch)."""
    widths = {"decoder": n + m + 1, "encoder": n + 1 + m, "encoder_decoder": max(n, m)}
    if model_kind not in widths:
        raise ValueError(f"model kind must be one of {', '.join(MODEL_KINDS)}; got {model_kind!r}")
    return widths[model_kind]


def sequence_positions(
    input_positions: Tensor, answer_positions: Tensor, sep_position: int, model_kind: str
) -> Tensor:
    """A sequence task's own positions (position coupling, Abacus), laid out as
    ``format_batch`` lays out the tokens: input_positions (n,), answer_positions (m,) -> (T,),
    shared by the batch's rows. ``decoder``: BOS at 0, the inputs', SEP at ``sep_position``,
    the answer's but the last (never fed); ``encoder``: the inputs', SEP, the answer's at its
    slots. ``encoder_decoder`` has none: its cross-attention carries no positions."""
    bos = torch.zeros(1, dtype=torch.long)
    sep = torch.full((1,), sep_position, dtype=torch.long)
    if model_kind == "decoder":
        return torch.cat([bos, input_positions, sep, answer_positions[:-1]])  # (n + m + 1,)
    if model_kind == "encoder":
        return torch.cat([input_positions, sep, answer_positions])  # (n + 1 + m,)
    raise ValueError(
        f"model={model_kind}: task positions are laid out for model=decoder or model=encoder"
    )


def grid_coordinates(shape: tuple[int, ...]) -> Tensor:
    """Row-major coordinates of every cell of a grid of this shape -> (prod(shape), A) int64."""
    axes = [torch.arange(size) for size in shape]
    return torch.stack(torch.meshgrid(*axes, indexing="ij"), dim=-1).reshape(-1, len(shape))


def format_grid(inputs: Tensor, answers: Tensor, shape: tuple[int, ...], dense: bool) -> dict:
    """Cells inputs (B, prod(shape)) flattened row-major; answers (B, prod(shape)) if ``dense``
    (one per cell, read at the cell) or (B, m) (read at m readout slots after the cells) ->
    {"inputs": {"tokens": (B, T), "positions": (T, A)}, "targets": (B, T)}."""
    batch_size, cells = inputs.shape
    positions = grid_coordinates(shape)  # (cells, A)
    if dense:
        return {
            "inputs": {"tokens": inputs + N_SPECIAL, "positions": positions},
            "targets": answers + N_SPECIAL,
        }
    slots = answers.shape[1]
    tokens = torch.cat([inputs + N_SPECIAL, torch.full((batch_size, slots), SLOT)], dim=1)
    no_position = torch.full((slots, len(shape)), -1, dtype=torch.long)  # (m, A)
    targets = torch.cat([torch.full((batch_size, cells), IGNORE), answers + N_SPECIAL], dim=1)
    return {
        "inputs": {"tokens": tokens, "positions": torch.cat([positions, no_position])},
        "targets": targets,  # (B, cells + m)
    }


def sequence_length(batch: dict) -> int:
    """Tokens the model processes for this batch: its longest token sequence."""
    return max(t.shape[1] for name, t in batch["inputs"].items() if name != "positions")


def max_position(batch: dict) -> int:
    """Positions the model sees for this batch: the longest sequence it processes, or for grids
    (``inputs["positions"]`` given) the extent along one axis (largest coordinate + 1)."""
    positions = batch["inputs"].get("positions")
    if positions is None:
        return sequence_length(batch)
    return int(positions.max()) + 1


# -- tagged sequences: answer t belongs to input token t --------------------------------------
def format_tagged(inputs: Tensor, answers: Tensor, model_kind: str) -> dict:
    """Tagged sequences (token tagging, language-modelling style scoring): inputs (B, n),
    answers (B, n) where answer t belongs to input token t and −1 marks a position that is not
    scored -> {"inputs": {...}, "targets": (B, T)} with ``IGNORE`` where nothing is scored.

    * ``decoder``: ``BOS x1…xn``, no shift: the output at ``x_t`` is scored against ``y_t``, so a
      causal model answers from ``BOS x1…xt``. A task whose answer is *held* by a later token
      (flip-flop's read bit, written right after the ``r``) tags it at the token before, so the
      token that holds it is never in view. BOS is never scored.
    * ``encoder``: ``x1…xn``, ``y_t`` read at ``x_t`` bidirectionally: only for tasks whose later
      tokens do not give the answer away (``Task.model_kinds``).
    * ``encoder_decoder``: ``format_batch``'s layout (the answers after the source, generated),
      only where every position is scored (an unscored answer cannot be fed back).
    """
    if model_kind == "encoder_decoder":
        if bool((answers < 0).any()):
            raise ValueError(
                "model=encoder_decoder: a tagged task with unscored positions has no answer to "
                "feed back; allowed: model=decoder or model=encoder"
            )
        return format_batch(inputs, answers, model_kind)
    targets = torch.where(answers < 0, IGNORE, answers + N_SPECIAL)  # (B, n)
    if model_kind == "decoder":
        bos = torch.full((inputs.shape[0], 1), BOS, dtype=torch.long)
        return {
            "inputs": {"tokens": torch.cat([bos, inputs + N_SPECIAL], dim=1)},  # (B, n+1)
            "targets": torch.cat([torch.full_like(bos, IGNORE), targets], dim=1),  # (B, n+1)
        }
    if model_kind == "encoder":
        return {"inputs": {"tokens": inputs + N_SPECIAL}, "targets": targets}  # (B, n) each
    raise ValueError(f"model kind must be one of {', '.join(MODEL_KINDS)}; got {model_kind!r}")


def tagged_tokens(n: int, model_kind: str) -> int:
    """Tokens the model processes for a tagged instance of n input symbols (``format_tagged``'s
    widths, as arithmetic)."""
    widths = {"decoder": n + 1, "encoder": n, "encoder_decoder": n}
    if model_kind not in widths:
        raise ValueError(f"model kind must be one of {', '.join(MODEL_KINDS)}; got {model_kind!r}")
    return widths[model_kind]


def tagged_answer_start(model_kind: str) -> int:
    """The first target column of a tagged batch that belongs to an answer (the decoder's BOS
    holds none): answer position p is target column start + p, scored or not."""
    return 1 if model_kind == "decoder" else 0
