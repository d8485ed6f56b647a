"""Evaluation: a layer of its own above ``lengen.data`` (data makes batches; this scores them).

``evaluate(data, model, lengths, settings=cfg.eval, …)`` returns one results row per length;
which scorer runs is what the data source names as its ``evaluation_kind``
(``lengen.data.source.DataSource``): ``tasks`` (``evaluation.tasks``: teacher-forced or greedy
accuracy and exact match, accuracy by depth) or ``text`` (``evaluation.text``: perplexity under
``nonoverlap`` / ``sliding`` windows, loss by position). ``evaluation.metrics`` holds the summed
batch statistics that training shares.

Why a run extrapolates as far as it does goes into ``report`` (results.json beside the rows):
``attention_diagnostics`` (``evaluation.diagnostics``, every kind, ``eval.diagnostics``) and
``accuracy_by_answer_position`` (``evaluation.by_position``, tasks), and
``effective_remembrance`` (``evaluation.remembrance``, ``eval.effrem``).
"""

from __future__ import annotations

from pathlib import Path

from lengen.evaluation.tasks import evaluate_task
from lengen.evaluation.text import evaluate_text

#: the scorer of each ``evaluation_kind`` a data source may name
EVALUATORS = {"tasks": evaluate_task, "text": evaluate_text}


def evaluate(
    data,
    model,
    lengths: list[int],
    *,
    settings,
    output_dir=None,
    tag="",
    progress=True,  # lengen.progress.as_mode: True a bar, or (mode, label)
    report: dict | None = None,
    on_row=None,  # called with the rows so far as each length finishes
):
    """Rows at every length; extra per-run files (loss by position, accuracy by depth and by
    answer position, attention diagnostics) go to ``output_dir`` with ``tag`` (``""`` for
    results.json, ``".<tag>"`` for eval.py's); sections for results.json go into ``report``."""
    try:
        scorer = EVALUATORS[getattr(data, "evaluation_kind", None)]
    except KeyError:
        raise TypeError(f"no evaluator for data of type {type(data).__name__}") from None
    sections: dict = {}
    rows = scorer(data, model, lengths, settings=settings, output_dir=output_dir, tag=tag,
                  progress=progress, report=sections, on_row=on_row)  # fmt: skip
    if settings.get("diagnostics", False):  # after scoring: it cannot change a row
        from lengen.evaluation.diagnostics import attention_diagnostics

        sections["attention_diagnostics"] = attention_diagnostics(
            data,
            model,
            [row["length"] for row in rows],
            samples=settings.get("diagnostics_samples", 4),
            evaluated=settings.samples,
        )
        if output_dir is not None and sections["attention_diagnostics"]["lengths"]:
            from lengen.plots.attention import plot_attention_diagnostics
            from lengen.plots.common import figure_output
            from lengen.plots.guard import draw

            stem = Path(output_dir) / f"attention_diagnostics{tag}"
            diagnostics = sections["attention_diagnostics"]
            draw(
                stem.name, plot_attention_diagnostics, diagnostics, stem, **figure_output(settings)
            )
    if settings.get("effrem", False):  # after scoring too (lengen.evaluation.remembrance)
        _remembrance(data, model, rows, settings, output_dir, tag, sections)
    if report is not None:
        report.update(sections)
    return rows


def _remembrance(data, model, rows, settings, output_dir, tag, sections) -> None:
    """results.json's ``effective_remembrance`` and its figure (``eval.effrem``)."""
    from lengen.evaluation.remembrance import remembrance_diagnostic

    section = remembrance_diagnostic(
        data,
        model,
        [row["length"] for row in rows],
        samples=settings.get("diagnostics_samples", 4),
        evaluated=settings.samples,
    )
    sections["effective_remembrance"] = section
    if output_dir is not None and section["lengths"]:
        from lengen.plots.common import figure_output
        from lengen.plots.guard import draw
        from lengen.plots.remembrance import plot_remembrance

        stem = Path(output_dir) / f"effective_remembrance{tag}"
        draw(stem.name, plot_remembrance, section, stem, **figure_output(settings))
