"""Per-length evaluation: one results row per requested length, nothing else.

Two protocols (``eval.decoding``), recorded in each row's ``protocol``:

* ``teacher_forced`` (default): the model sees the true answer prefix and is scored on every
  answer token; ``exact_match`` asks for all of an instance's answer tokens to be right.
* ``greedy``: the model generates its answer, each token the argmax given the prompt and its own
  earlier tokens, with the key/value cache of ``lengen.model.cache`` (``decode``); all instances
  of a batch share one length, so the batch decodes together, one step per answer token.
  ``exact_match``: the generated answer equals the answer. ``accuracy``: the fraction of
  generated tokens equal to the answer's token at the same index; after a first error the later
  tokens continue a diverged answer and are still counted (the usual definition). ``loss``: the
  teacher-forced loss of the same instances (one full forward pass), so rows of both protocols
  share its meaning.

  Per model kind: ``decoder`` feeds ``BOS x SEP`` and generates m tokens; ``encoder_decoder``
  encodes x once and generates m target tokens after BOS; ``encoder`` reads its m answer slots in
  one bidirectional pass, where nothing depends on earlier outputs, so its greedy answer is the
  argmax at the slots and its rows equal teacher-forced ones (recorded as ``greedy`` all the same).

  Since decoding scores the function teacher forcing scores (same positions, same length-dependent
  factors; ``lengen.model.cache``), a greedy answer is entirely right exactly when every
  teacher-forced argmax is: ``exact_match`` agrees between the protocols up to ties in the argmax,
  and greedy ``accuracy`` differs by counting tokens after the first error against the model.

Every row also records what it cost: ``seconds``, ``peak_mem_mb`` (growth over the memory in
use before, ``lengen.measure``) and ``batch_size``: instances per batch, from the token budget
``eval.max_tokens_per_batch``, halved after each out-of-memory error until it fits.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor
from tqdm.auto import tqdm

from lengen.config import PROTOCOLS
from lengen.data.datamodule import IGNORE, TaskData, max_position
from lengen.measure import batch_size_for, measured_with_oom_halving


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


def answer_span(targets: Tensor) -> tuple[int, int]:
    """(first scored index, answer length m) of targets (B, T): every row of a batch shares
    one layout, whose scored columns (the answer) run from there to the end."""
    scored = (targets[0] != IGNORE).nonzero().flatten()
    return int(scored[0]), len(scored)


@torch.no_grad()
def greedy_generate(model: torch.nn.Module, inputs: dict, targets: Tensor) -> Tensor:
    """Greedy answers (B, m) for one batch, decoded with the key/value cache.

    ``inputs`` are the teacher-forced inputs of the batch (``format_batch``); only their prompt
    part is read. One step per answer token, for the whole batch at once.
    """
    start, answer_length = answer_span(targets)
    if model.kind == "encoder":  # the answer slots are read in one bidirectional pass
        return model(**inputs)[:, start:].argmax(-1)
    if model.kind == "decoder":
        tokens = inputs["tokens"]  # (B, N): BOS x SEP y1 … y(m−1)
        cache = model.new_cache(tokens.shape[1])
        prompt = tokens[:, : start + 1]  # BOS x SEP: the last prompt token predicts y1
    elif model.kind == "encoder_decoder":
        tokens = inputs["tgt"]  # (B, m): BOS y1 … y(m−1)
        cache = model.new_cache(tokens.shape[1], inputs["src"])  # encodes x once
        prompt = tokens[:, :1]  # BOS
    else:
        raise ValueError(f"greedy decoding: unknown model kind {model.kind!r}")
    generated = []
    logits = model.decode(prompt, cache)[:, -1]  # (B, V)
    for index in range(answer_length):
        token = logits.argmax(-1)  # (B,)
        generated.append(token)
        if index + 1 < answer_length:  # the last answer token is never fed back
            logits = model.decode(token[:, None], cache)[:, -1]
    return torch.stack(generated, dim=1)  # (B, m)


def greedy_stats(
    model: torch.nn.Module, inputs: dict, targets: Tensor, logits: Tensor
) -> dict[str, float]:
    """Summed statistics of one batch under greedy decoding; ``logits`` (B, T, V), the
    teacher-forced forward pass of the batch, gives the loss."""
    start, _ = answer_span(targets)
    answers = targets[:, start:]  # (B, m)
    correct = greedy_generate(model, inputs, targets) == answers  # (B, m)
    return {
        "loss_sum": float(loss_sum(logits, targets)),
        "tokens": float(correct.numel()),
        "correct_tokens": float(correct.sum()),
        "exact": float(correct.all(-1).sum()),
        "examples": float(targets.shape[0]),
    }


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

        def score(batch_size: int, length: int = length) -> tuple[dict[str, float], dict]:
            totals: dict[str, float] = {}
            for batch in data.eval_batches(length, samples, batch_size):
                inputs = {k: v.to(device) for k, v in batch["inputs"].items()}
                targets = batch["targets"].to(device)
                logits = model(**inputs)
                if protocol == "greedy":
                    _add(totals, greedy_stats(model, inputs, targets, logits))
                else:
                    _add(totals, batch_stats(logits, targets))
            return totals, batch

        batch_size = batch_size_for(
            data.max_position(length), token_budget=max_tokens_per_batch, max_batch_size=samples
        )
        (totals, batch), cost = measured_with_oom_halving(score, batch_size, device)
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
                **cost,
            }
        )
    model.train(was_training)
    return rows
