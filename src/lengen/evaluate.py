"""Per-length evaluation: one results row per requested length, nothing else.

Teacher-forced scoring (``protocol: teacher_forced``): the model sees the true answer prefix and
is scored on every answer token; ``exact_match`` asks for all of an instance's answer tokens to
be right.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor
from tqdm.auto import tqdm

from lengen.config import PROTOCOLS
from lengen.data.datamodule import IGNORE, TaskData, max_position


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


def summarise(stats: dict[str, float]) -> dict[str, float]:
    tokens = max(stats["tokens"], 1.0)
    return {
        "loss": stats["loss_sum"] / tokens,
        "accuracy": stats["correct_tokens"] / tokens,
        "exact_match": stats["exact"] / max(stats["examples"], 1.0),
    }


def _add(total: dict[str, float], part: dict[str, float]) -> None:
    for key, value in part.items():
        total[key] = total.get(key, 0.0) + value


@torch.no_grad()
def evaluate(
    model: torch.nn.Module,
    data: TaskData,
    lengths: list[int],
    *,
    samples: int,
    max_tokens_per_batch: int = 65536,
    protocol: str = "teacher_forced",
    progress: bool = True,
) -> list[dict]:
    """Score ``samples`` held-out instances at each exact length -> rows sorted by length."""
    if protocol not in PROTOCOLS:
        raise ValueError(f"eval.decoding must be one of {', '.join(PROTOCOLS)}; got {protocol!r}")
    was_training = model.training
    model.eval()
    device = next(model.parameters()).device
    rows = []
    for length in tqdm(sorted(set(lengths)), desc="evaluate", unit="length", disable=not progress):
        batch_size = max(1, max_tokens_per_batch // data.max_position(length))
        totals: dict[str, float] = {}
        for batch in data.eval_batches(length, samples, batch_size):
            inputs = {k: v.to(device) for k, v in batch["inputs"].items()}
            logits = model(**inputs)
            _add(totals, batch_stats(logits, batch["targets"].to(device)))
        rows.append(
            {
                "length": length,
                "in_distribution": data.min_len <= length <= data.train_len,
                "max_position": max_position(batch),
                "protocol": protocol,
                "n_examples": int(totals["examples"]),
                **summarise(totals),
                "ppl": None,
                "chance_accuracy": data.task.chance_accuracy,
            }
        )
    model.train(was_training)
    return rows
