"""Effective Remembrance (Buitrago Ruiz & Gu, ICML 2025, "Understanding and Improving Length
Generalization in Recurrent Models", arXiv 2507.02782; docs/models.md "Training the state").

How much the prediction after a context x[0:T] still depends on its first t tokens: with
q(· | context) the model's next-token distribution,

    EffRem_T(t) = d(q(· | x[0:T]), q(· | x[t:T])),   d = total variation, ½ Σ_v |q(v) − q′(v)|,

as the authors define it ("If EffRem_T(t) = 0, ... the model does not 'effectively remember'
any of the past tokens x[0:t−1]"; their post, ``goombalab/goombalab.github.io``
``_posts/2025-07-06-improving-length-generalization.md``; the paper's Figure 1 (d–f) plots it
against t). Models that fail to length-generalise have a high EffRem_T(t) at small t: their
prediction hangs on the sequence's start. The suffix x[t:T] is a sequence of its own (positions
from 0, a zero recurrent state), as a context that starts there.

``effective_remembrance`` is the function (any causal model ``tokens -> logits``);
``remembrance_diagnostic`` is the evaluation's (``eval.effrem``): per evaluation length, the
curve of the first held-out instances (as the attention diagnostics choose them), averaged
over them, into results.json's ``effective_remembrance`` and a figure. It runs after scoring,
in its own random state, so no row changes whether it runs or not.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import torch
from torch import Tensor

#: starting points t per curve: evenly spaced over [0, T), the start (0: EffRem 0) included
POINTS = 32
#: digits kept in results.json: an untrained or well-generalising model's distances are ~1e-4
DIGITS = 6


@torch.no_grad()
def effective_remembrance(
    model: Callable[[Tensor], Tensor], tokens: Tensor, starts: Sequence[int]
) -> Tensor:
    """EffRem_T(t) for each t of ``starts`` (module docstring): tokens (B, T) -> (B, len(starts))
    total-variation distances in [0, 1], between the next-token distributions after
    x[0:T] and after x[t:T]. ``model``: tokens (B, n) -> logits (B, n, V), causal."""
    length = tokens.shape[1]
    bad = [t for t in starts if not (isinstance(t, int) and 0 <= t < length)]
    if bad:
        raise ValueError(f"starts must be integers in [0, {length}) (T = {length}); got {bad}")
    # float64 at least for the distributions: a distance of near-equal ones is a small difference
    full = _next_token(model, tokens)  # (B, V)
    distances = [0.5 * (full - _next_token(model, tokens[:, t:])).abs().sum(-1) for t in starts]
    return torch.stack(distances, dim=1)  # (B, len(starts)), float64


def _next_token(model, tokens: Tensor) -> Tensor:
    logits = model(tokens)[:, -1]  # (B, V): the prediction after the last token
    return logits.to(torch.promote_types(logits.dtype, torch.float64)).softmax(-1)


def curve_starts(length: int, points: int = POINTS) -> list[int]:
    """Up to ``points`` starting points evenly spaced over [0, length), 0 first."""
    step = max(1, -(-length // points))  # integer ceil
    return list(range(0, length, step))


def task_contexts(data, length: int, samples: int, evaluated: int) -> dict:
    """The first ``samples`` held-out instances at ``length``, cut after the token whose
    prediction is the first answer token (the prompt and its separator): T is where the task
    asks its first question, not after the answer, where nothing is scored."""
    from lengen.data.source import IGNORE

    inputs = data.held_out_inputs(length, evaluated, data.eval_seed)[:samples]  # (k, n)
    batch = next(data.batches_of(inputs, samples))
    scored = (batch["targets"] != IGNORE).any(0).nonzero()  # columns predicting an answer
    end = int(scored[0]) + 1 if len(scored) else batch["targets"].shape[1]
    return {key: value[:, :end] for key, value in batch["inputs"].items()}


def remembrance_diagnostic(data, model, lengths: list[int], *, samples: int, evaluated: int):
    """results.json's ``effective_remembrance``: per length, T (the tokens an instance has),
    the starting points t and EffRem_T(t) averaged over the instances looked at."""
    from lengen.evaluation.diagnostics import INPUTS, diagnostic_pass

    section = {"distance": "total_variation", "samples": 0, "train_len": data.train_len,
               "lengths": {}, "skipped": []}  # fmt: skip
    select = {**INPUTS, "tasks": task_contexts}.get(getattr(data, "evaluation_kind", None))
    if select is None or getattr(model, "kind", None) != "decoder":
        section["skipped"].append("EffRem needs a decoder on sequences (tasks or text)")
        return section
    with diagnostic_pass(model, data) as (device, seed_length):
        for length in sorted(set(lengths)):
            seed_length(length)
            inputs = select(data, length, samples, evaluated)
            if set(inputs) - {"tokens"}:  # task positions, grids: no suffix of their own
                section["skipped"].append(
                    f"inputs {sorted(set(inputs) - {'tokens'})}: a suffix has no positions "
                    f"of its own to take; EffRem looks at token-only sequences"
                )
                break
            tokens = inputs["tokens"].to(device)  # (k, T)
            starts = curve_starts(tokens.shape[1])
            curve = effective_remembrance(model, tokens, starts).mean(0)  # (len(starts),)
            section["samples"] = max(section["samples"], int(tokens.shape[0]))
            section["lengths"][str(length)] = {
                "tokens": int(tokens.shape[1]),
                "t": starts,
                "effrem": [round(float(value), DIGITS) for value in curve],
            }
    return section
