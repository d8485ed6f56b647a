"""Evaluation: a layer of its own above ``lengen.data`` (data makes batches; this scores them).

``evaluate(data, model, lengths, settings=cfg.eval, …)`` returns one results row per length;
which scorer runs is what the data source names as its ``evaluation_kind``
(``lengen.data.source.DataSource``): ``tasks`` (``evaluation.tasks``: teacher-forced or greedy
accuracy and exact match, accuracy by depth) or ``text`` (``evaluation.text``: perplexity under
``nonoverlap`` / ``sliding`` windows, loss by position). ``evaluation.metrics`` holds the summed
batch statistics that training shares.
"""

from __future__ import annotations

from lengen.evaluation.tasks import evaluate_task
from lengen.evaluation.text import evaluate_text

#: the scorer of each ``evaluation_kind`` a data source may name
EVALUATORS = {"tasks": evaluate_task, "text": evaluate_text}


def evaluate(data, model, lengths: list[int], *, settings, output_dir=None, tag="", progress=True):
    """Rows at every length; extra per-run files (loss by position, accuracy by depth) go to
    ``output_dir`` with ``tag`` (``""`` for results.json, ``".<tag>"`` for eval.py's)."""
    try:
        scorer = EVALUATORS[getattr(data, "evaluation_kind", None)]
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
