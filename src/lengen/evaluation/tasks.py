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
  Tagged tasks (``layout.format_tagged``) on a decoder or encoder read their answers at the
  input tokens and feed none back, so greedy is the argmax at the tokens there too, and equals
  teacher forcing; only their scored positions count in either protocol.

  Since decoding scores the function teacher forcing scores (same positions, same length-dependent
  factors; ``lengen.model.cache``), a greedy answer is entirely right exactly when every
  teacher-forced argmax is: ``exact_match`` agrees between the protocols up to ties in the argmax,
  and greedy ``accuracy`` differs by counting tokens after the first error against the model.

Grid tasks (``data.axes`` > 1, encoder only): ``length`` is the side; ``max_position`` the
extent along one axis (what the encoding saw), and rows add ``grid_shape`` (the token grid) and
``sequence_length`` (tokens per instance, which sizes the batches). Greedy reads the argmax at
the scored cells or at the readout slot.

Every row also records what it cost: ``seconds``, ``peak_mem_mb`` (growth over the memory in
use before, ``lengen.measure``) and ``batch_size``: instances per batch, from the token budget
``eval.max_tokens_per_batch``, halved after each out-of-memory error until it fits.
"""

from __future__ import annotations

from pathlib import Path

import torch
from torch import Tensor

from lengen.checks import EvaluationOutOfMemory
from lengen.data.layout import tagged_answer_start
from lengen.data.source import mix_seed
from lengen.data.task_data import IGNORE, TaskData, max_position, sequence_length
from lengen.evaluation.by_position import PositionTally, position_section, teacher_forced_correct
from lengen.evaluation.loop_choice import choose_at_length
from lengen.evaluation.metrics import add_stats, batch_stats, loss_sum, summarise
from lengen.measure import batch_size_for, is_out_of_memory, measured_with_oom_halving
from lengen.model.looped import loop_facts
from lengen.options import PROTOCOLS
from lengen.pe.base import PositionalEncoding
from lengen.progress import as_mode, each


def answer_span(targets: Tensor) -> tuple[int, int]:
    """(first scored index, answer length m) of targets (B, T): every row of a batch shares
    one layout, whose scored columns (the answer) run from there to the end."""
    scored = (targets[0] != IGNORE).nonzero().flatten()
    return int(scored[0]), len(scored)


@torch.no_grad()
def greedy_generate(
    model: torch.nn.Module,
    inputs: dict,
    targets: Tensor,
    start: int | None = None,
    logits: Tensor | None = None,
) -> Tensor:
    """Greedy answers (B, m) for one batch, decoded with the key/value cache.

    ``inputs`` are the teacher-forced inputs of the batch (``format_batch``); only their prompt
    part is read. One step per answer token, for the whole batch at once. ``start`` (tagged
    tasks on a decoder or encoder, ``layout.tagged_answer_start``): the answers are read at
    the input tokens, none is fed back, so the answer is the argmax of one pass from there;
    an encoder reads its answer slots in one pass too. ``logits`` (B, T, V): the caller's
    teacher-forced pass over the same ``inputs``, which is that one pass (not recomputed).
    """
    one_pass = start is not None or model.kind == "encoder"  # encoder: grids' cells too
    if start is None:
        start, answer_length = answer_span(targets)
    if one_pass:
        return (model(**inputs) if logits is None else logits)[:, start:].argmax(-1)
    if model.kind == "decoder":
        tokens = inputs["tokens"]  # (B, N): BOS x SEP y1 … y(m−1)
        # a task's own positions (N,) are known from its layout before generation (passed only
        # where given: a model of one's own may take new_cache(total_length) alone)
        given = {"positions": inputs["positions"]} if "positions" in inputs else {}
        cache = model.new_cache(tokens.shape[1], **given)
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


def greedy_correct(
    model: torch.nn.Module,
    inputs: dict,
    targets: Tensor,
    start: int | None = None,
    logits: Tensor | None = None,
) -> Tensor:
    """Whether each generated answer token equals the answer's -> (B, m) bool (unscored
    positions of tagged tasks: False); ``logits`` as in ``greedy_generate``."""
    generated = greedy_generate(model, inputs, targets, start, logits)
    start = answer_span(targets)[0] if start is None else start
    return generated == targets[:, start:]  # (B, m)


def greedy_stats(
    model: torch.nn.Module,
    inputs: dict,
    targets: Tensor,
    logits: Tensor,
    correct: Tensor | None = None,
    scored: Tensor | None = None,
) -> dict[str, float]:
    """Summed statistics of one batch under greedy decoding; ``logits`` (B, T, V), the
    teacher-forced forward pass of the batch, gives the loss; ``correct`` (B, m), the batch's
    ``greedy_correct`` where the caller has it; ``scored`` (B, m), the answer positions that
    count (tagged tasks score some; None: all)."""
    if correct is None:
        correct = greedy_correct(model, inputs, targets)  # (B, m)
    if scored is None:
        scored = torch.ones_like(correct)
    return {
        "loss_sum": float(loss_sum(logits, targets)),
        "tokens": float(scored.sum()),
        "correct_tokens": float((correct & scored).sum()),
        "exact": float((correct | ~scored).all(-1).sum()),
        "examples": float(targets.shape[0]),
    }


def evaluate_task(
    data: TaskData,
    model: torch.nn.Module,
    lengths: list[int],
    *,
    settings,
    output_dir: Path | None = None,
    tag: str = "",
    progress: bool | str | tuple[str, str] = True,  # lengen.progress.as_mode
    report: dict | None = None,
    on_row=None,  # called with the rows so far as each length finishes (score_lengths)
) -> list[dict]:
    """Results rows at every length (the ``eval`` config group in ``settings``).

    Accuracy by answer position (``evaluation.by_position``) goes into ``report`` (results.json's
    ``accuracy_by_answer_position``) and, with its heatmap, ``accuracy_by_position<tag>`` into
    ``output_dir``. Tasks that locate their answer (``task.depth``, e.g. passkey) also write
    ``accuracy_by_depth<tag>.json`` and its figure into ``output_dir``; ``tag`` is ``""`` for
    results.json and ``".<tag>"`` for eval.py's results.<tag>.json."""
    tallies: dict[int, PositionTally] = {}
    rows = score_lengths(
        model,
        data,
        lengths,
        samples=settings.samples,
        max_tokens_per_batch=settings.max_tokens_per_batch,
        protocol=settings.decoding,
        position_draws=settings.get("position_draws", 1),
        progress=progress,
        by_position=tallies,
        on_row=on_row,
    )
    section = position_section(tallies, data.train_len)
    if report is not None:
        report["accuracy_by_answer_position"] = section
    if output_dir is not None and tallies:
        from lengen.plots.common import figure_output
        from lengen.plots.guard import draw
        from lengen.plots.run import plot_position_heatmap

        stem = Path(output_dir) / f"accuracy_by_position{tag}"
        draw(stem.name, plot_position_heatmap, section, stem, **figure_output(settings))
    if output_dir is not None and data.locates_answer:
        from lengen.evaluation.by_depth import depth_report, write_depth_report

        report = depth_report(
            model,
            data,
            lengths,
            samples=settings.samples,
            max_tokens_per_batch=settings.max_tokens_per_batch,
        )
        write_depth_report(report, Path(output_dir), tag, settings)
    return rows


@torch.no_grad()
def score_lengths(
    model: torch.nn.Module,
    data: TaskData,
    lengths: list[int],
    *,
    samples: int,
    max_tokens_per_batch: int = 65536,
    protocol: str = "teacher_forced",
    position_draws: int = 1,
    progress: bool | str | tuple[str, str] = True,  # lengen.progress.as_mode
    by_position: dict | None = None,
    on_row=None,
) -> list[dict]:
    """Score ``samples`` distinct held-out instances at each exact length -> rows sorted by
    length. Models that randomize positions at evaluation are scored under ``position_draws``
    draws per length (seeded by the evaluation seed, the length and the draw); their rows hold
    the mean over draws and ``<metric>_draw_std``, the spread across draws. ``by_position``, a
    dict, receives a ``PositionTally`` per length (``evaluation.by_position``), summed over
    draws. ``on_row(rows)``: called with the rows so far as each length finishes, so a caller
    can keep them where the process may die without unwinding (E13b)."""
    if protocol not in PROTOCOLS:
        raise ValueError(f"eval.decoding must be one of {', '.join(PROTOCOLS)}; got {protocol!r}")
    was_training = model.training
    model.eval()
    device = next(model.parameters()).device
    drawing = [
        pe for pe in model.modules() if isinstance(pe, PositionalEncoding) and pe.randomizing
    ]
    draws = position_draws if drawing else 1
    rows = []
    # tagged tasks read answers at the input tokens (none fed back; layout.format_tagged)
    reads_at_tokens = data.task.tagged and data.model_kind != "encoder_decoder"
    start = tagged_answer_start(data.model_kind) if reads_at_tokens else None
    mode, label = as_mode(progress)
    lengths = each(sorted(set(lengths)), desc="evaluate", unit="length", mode=mode, label=label,
                   cost=lambda length: length)  # fmt: skip
    for length in lengths:
        inputs = data.held_out_inputs(length, samples, data.eval_seed)  # (N, n), distinct

        def score(batch_size: int, inputs: Tensor = inputs):
            """-> (summed statistics, the last batch, its PositionTally)"""
            totals: dict[str, float] = {}
            tally = PositionTally()
            for batch in data.batches_of(inputs, batch_size):
                model_inputs = {k: v.to(device) for k, v in batch["inputs"].items()}
                targets = batch["targets"].to(device)
                logits = model(**model_inputs)
                tally.add("teacher_forced", *teacher_forced_correct(logits, targets, start))
                if protocol == "greedy":
                    # tagged tasks and encoders answer in one pass: the one just made
                    correct = greedy_correct(model, model_inputs, targets, start, logits)
                    first = answer_span(targets)[0] if start is None else start
                    scored = targets[:, first:] != IGNORE  # (B, m)
                    tally.add("greedy", correct & scored, scored)
                    stats = greedy_stats(model, model_inputs, targets, logits, correct, scored)
                    add_stats(totals, stats)
                else:
                    add_stats(totals, batch_stats(logits, targets))
            return totals, batch, tally

        batch_size = batch_size_for(
            data.sequence_length(length), token_budget=max_tokens_per_batch, max_batch_size=samples
        )
        per_draw, costs, tally = [], [], PositionTally()
        # model.loop_rule=confidence: this length's loop count (none for other rules)
        choice = choose_at_length(model, data, inputs, length, batch_size, device)
        for draw in range(draws):
            for pe in drawing:
                pe.draw_seed = mix_seed(data.eval_seed, length, draw)
            try:
                with choice.forced():
                    (totals, batch, drawn), cost = measured_with_oom_halving(
                        score, batch_size, device
                    )
            except Exception as error:
                raise_if_out_of_memory(error, length, rows, device)
                raise
            tally.merge(drawn)
            per_draw.append(summarise(totals))
            costs.append(cost)
        for pe in drawing:
            pe.draw_seed = None
        if by_position is not None:
            by_position[length] = tally
        baseline_accuracy, baseline_exact = constant_baseline(data.task.solve(inputs))
        rows.append(
            {
                "length": length,
                "in_distribution": data.min_len <= length <= data.train_len,
                "max_position": max_position(batch),  # grids: the extent along one axis
                **grid_facts(data, length, batch),
                **loop_facts(model, sequence_length(batch)),  # looped depth: K(T) at its T tokens
                **choice.facts,  # loop_rule=confidence: the chosen count and its curve
                "protocol": protocol,
                "n_examples": int(totals["examples"]),
                "n_unique": int(torch.unique(inputs, dim=0).shape[0]),
                **over_draws(per_draw),
                "ppl": None,
                "chance_accuracy": data.task.chance_accuracy,
                "baseline_accuracy": baseline_accuracy,
                "baseline_exact_match": baseline_exact,
                "seconds": sum(c["seconds"] for c in costs),
                "peak_mem_mb": max(c["peak_mem_mb"] for c in costs),
                "batch_size": min(c["batch_size"] for c in costs),
            }
        )
        if on_row is not None:
            on_row(list(rows))
    model.train(was_training)
    return rows


def grid_facts(data: TaskData, length: int, batch: dict) -> dict:
    """What a grid row adds: the token grid's shape and the tokens per instance (``length`` and
    ``max_position`` are the side); nothing for sequence tasks, whose rows stay as they were."""
    if data.axes == 1:
        return {}
    return {"grid_shape": data.grid_shape(length), "sequence_length": sequence_length(batch)}


def over_draws(per_draw: list[dict[str, float]]) -> dict:
    """Metrics averaged over position draws; with several draws also ``position_draws`` and
    each metric's sample standard deviation across them (``<metric>_draw_std``)."""
    if len(per_draw) == 1:
        return per_draw[0]
    summary: dict = {"position_draws": len(per_draw)}
    for key in per_draw[0]:
        values = torch.tensor([draw[key] for draw in per_draw], dtype=torch.float64)
        summary[key] = float(values.mean())
        summary[f"{key}_draw_std"] = float(values.std())
    return summary


def constant_baseline(answers: Tensor) -> tuple[float, float]:
    """(per-token accuracy, exact match) of the best constant predictor on these answers
    (N, m): the most frequent symbol at each answer position, fitted on the same instances;
    tagged tasks' unscored positions (−1) are left out of both.

    This is the trivial predictor a model must beat, not uniform chance: in bucket sort, for
    instance, the most frequent symbol per position is right far more often than 1/|symbols|.
    """
    answers = answers.long()
    scored = answers >= 0  # (N, m)
    n_symbols = max(int(answers.max()) + 1, 1)
    counts = torch.zeros(answers.shape[1], n_symbols, dtype=torch.long)  # (m, V)
    counts.scatter_add_(1, answers.clamp(min=0).t(), scored.long().t())
    top, mode = counts.max(dim=1)  # (m,) each
    accuracy = float(top.sum()) / max(int(scored.sum()), 1)
    exact = float(((answers == mode) | ~scored).all(dim=1).float().mean())
    return accuracy, exact


def raise_if_out_of_memory(error: BaseException, length: int, rows: list[dict], device) -> None:
    """Out of memory at one instance per batch: one line naming the length, the rows measured
    so far kept (``EvaluationOutOfMemory.rows``)."""
    if is_out_of_memory(error):
        raise EvaluationOutOfMemory(
            f"eval.lengths: length {length} does not fit in {device} memory even one instance "
            f"at a time; the {len(rows)} shorter lengths were measured and are kept; allowed: "
            f"shorter eval.lengths / eval.factors",
            rows,
        ) from None
