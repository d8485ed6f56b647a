"""Evaluation: a layer of its own above ``lengen.data`` (data makes batches; this scores them).

``evaluate(data, model, lengths, settings=cfg.eval, …)`` returns one results row per length;
which scorer runs follows the data source's type: tasks (``evaluation.tasks``: teacher-forced or
greedy accuracy and exact match, accuracy by depth) or text (``evaluation.text``: perplexity
under ``nonoverlap`` / ``sliding`` windows, loss by position). ``evaluation.metrics`` holds the
summed batch statistics that training shares.
"""

from __future__ import annotations

from lengen.data.datamodule import TaskData
from lengen.data.text import TextData
from lengen.evaluation.tasks import evaluate_task
from lengen.evaluation.text import evaluate_text

#: the scorer of each data source type
EVALUATORS = {TaskData: evaluate_task, TextData: evaluate_text}


def evaluate(data, model, lengths: list[int], *, settings, output_dir=None, tag="", progress=True):
    """Rows at every length; extra per-run files (loss by position, accuracy by depth) go to
    ``output_dir`` with ``tag`` (``""`` for results.json, ``".<tag>"`` for eval.py's)."""
    try:
        scorer = EVALUATORS[type(data)]
    except KeyError:
        raise TypeError(f"no evaluator for data of type {type(data).__name__}") from None
    return scorer(
        data,
        model,
        lengths,
        settings=settings,
        output_dir=output_dir,
        tag=tag,
        progress=progress,
    )
