"""Summed statistics of scored batches, shared by training (``lengen.lit``) and evaluation.

Statistics are sums (loss, tokens, correct tokens, exact instances, instances) so that batches,
lengths and processes add up exactly; ``summarise`` turns them into means at the end.
"""

from __future__ import annotations

import torch.nn.functional as F
from torch import Tensor

from lengen.data.source import IGNORE

#: the keys of a statistics dict, in the order processes reduce them
STAT_KEYS = ("loss_sum", "tokens", "correct_tokens", "exact", "examples")


def loss_sum(logits: Tensor, targets: Tensor) -> Tensor:
    """Summed cross-entropy over scored tokens: logits (B, T, V), targets (B, T) -> scalar."""
    return F.cross_entropy(
        logits.float().flatten(0, 1), targets.flatten(), ignore_index=IGNORE, reduction="sum"
    )


def batch_stats(logits: Tensor, targets: Tensor, loss: Tensor | None = None) -> dict[str, float]:
    """Summed statistics of one batch: logits (B, T, V), targets (B, T) with IGNORE; ``loss``,
    the batch's ``loss_sum`` if the caller already has it (training), is not computed again."""
    logits = logits.detach()
    scored = targets != IGNORE  # (B, T)
    loss = loss_sum(logits, targets) if loss is None else loss.detach()
    correct = (logits.argmax(-1) == targets) & scored  # (B, T)
    return {
        "loss_sum": float(loss),
        "tokens": float(scored.sum()),
        "correct_tokens": float(correct.sum()),
        "exact": float((correct.sum(-1) == scored.sum(-1)).sum()),
        "examples": float(targets.shape[0]),
    }


def add_stats(total: dict[str, float], part: dict[str, float]) -> dict[str, float]:
    """``total`` += ``part``, key by key; returns ``total``."""
    for key, value in part.items():
        total[key] = total.get(key, 0.0) + value
    return total


def summarise(stats: dict[str, float]) -> dict[str, float]:
    tokens = max(stats["tokens"], 1.0)
    return {
        "loss": stats["loss_sum"] / tokens,
        "accuracy": stats["correct_tokens"] / tokens,
        "exact_match": stats["exact"] / max(stats["examples"], 1.0),
    }
