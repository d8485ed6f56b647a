"""The only code that knows the results.json schema (see DESIGN.md): building, checking,
writing and reading results, and their terminal table.

Besides DESIGN's required keys (``REQUIRED_KEYS``, ``ROW_KEYS``), ``build_results`` writes, among
others: ``data_seed`` (the seed of the training stream: ``data.seed``, or ``seed`` where that is
null) and ``length_ratio`` (how far the run extrapolates: ρ_τ per protocol and threshold,
``length_ratios``; docs/analysis.md). Readers treat both as optional: results written before
them lack them."""

from __future__ import annotations

import json
import math
from pathlib import Path

from lengen.atomic import atomic_write
from lengen.provenance import provenance

REQUIRED_KEYS = (
    "pe",
    "model",
    "task",
    "train_len",
    "seed",
    "n_params",
    "train_tokens",
    "provenance",
    "eval",
)
ROW_KEYS = (
    "length",
    "in_distribution",
    "max_position",
    "protocol",
    "n_examples",
    "loss",
    "accuracy",
    "exact_match",
    "ppl",
)


def build_results(
    cfg, model, data, rows: list[dict], *, train_tokens: int, device: str, extra: dict | None = None
) -> dict:
    """The results dictionary of a run (or a re-evaluation) from its config and model."""
    thresholds = cfg.eval.get("ratio_thresholds") or RATIO_THRESHOLDS  # older configs lack it
    stacks = {name: m.pe for name, m in model.named_children() if hasattr(m, "pe")}
    described = {name: {**pe.describe(), **pe.describe_options()} for name, pe in stacks.items()}
    # one stack: its encoding's facts; encoder–decoder: per stack (T5's bucket mode differs)
    pe_info = next(iter(described.values())) if len(described) == 1 else described
    results = {
        "pe": cfg.pe.name,
        "model": cfg.model.name,
        "task": cfg.data.name,
        "train_len": cfg.data.len,
        "seed": cfg.seed,
        # what seeded the training stream: data.seed, or the seed where that is null
        "data_seed": getattr(data, "seed", cfg.seed),
        "n_params": sum(p.numel() for p in model.parameters()),
        "train_tokens": train_tokens,
        "position_blind": model.position_blind,
        "pe_info": pe_info,
        "data": {**data.describe(), "summary": data.training_summary()},
        "eval_settings": {
            "lengths": [row["length"] for row in rows],
            "samples": cfg.eval.samples,
            "seed": cfg.eval.seed,
            "decoding": cfg.eval.decoding,
        },
        **(extra or {}),
        "provenance": provenance(device),
        "eval": sort_rows(rows),
    }
    verdict = learning_verdict(results)
    trained = results.pop("trained_verdict", None)  # eval.py: the run's own, from results.json
    if verdict is not None and trained is not None:
        # whether the model learned is the training's verdict; this evaluation's own value is
        # kept beside it (an override such as PI ×4 moves accuracy in distribution too)
        verdict = {**trained, "this_evaluation": verdict["value"]}
    results["learned"] = verdict
    results["length_ratio"] = length_ratios(results["eval"], cfg.data.len, thresholds)
    if message := learning_message(results):
        results["warnings"] = [*results.get("warnings", []), message]
    return results


def learning_message(results: dict) -> str | None:
    """The warning a run's verdict calls for, or None: not learned (train longer), or, for a
    re-evaluation of a run that learned, an evaluation that changed it in distribution."""
    verdict = results.get("learned")
    if not verdict:
        return None
    if not verdict["learned"]:
        return not_learned_message(results)
    if verdict.get("this_evaluation", verdict["value"]) < verdict["threshold"]:
        return changed_in_distribution_message(results)
    return None


#: per-token accuracy at the training length below which a run did not learn its task (the
#: default of aggregation's --min-accuracy): its numbers beyond training say nothing about PEs
LEARNED_ACCURACY = 0.9


def in_distribution_accuracy(results: dict) -> float | None:
    """Per-token accuracy at the training length (teacher-forced when present); without a row
    at the training length, the longest in-distribution row; None where no accuracy exists."""
    rows = [r for r in results["eval"] if r.get("accuracy") is not None]
    at_train = [r for r in rows if r["length"] == results["train_len"]]
    if not at_train:
        in_dist = [r for r in rows if r.get("in_distribution")]
        longest = max((r["length"] for r in in_dist), default=None)
        at_train = [r for r in in_dist if r["length"] == longest]
    if not at_train:
        return None
    at_train.sort(key=lambda r: (r["protocol"] != "teacher_forced", r["protocol"]))
    return float(at_train[0]["accuracy"])


def learning_verdict(results: dict, threshold: float = LEARNED_ACCURACY) -> dict | None:
    """Whether the run learned its task in distribution; None without accuracy (text)."""
    value = in_distribution_accuracy(results)
    if value is None:
        return None
    return {
        "metric": "accuracy",
        "threshold": threshold,
        "value": value,
        "learned": value >= threshold,
    }


def below(value: float, threshold: float) -> str:
    """``value`` (< threshold) written with the fewest decimals (2 at least) that still show it
    below ``threshold``: 0.8983 against 0.9 is "0.898", never "0.90"."""
    for decimals in range(2, 10):
        text = f"{value:.{decimals}f}"
        if float(text) < threshold:
            return text
    return repr(value)


def not_learned_message(results: dict) -> str:
    verdict = results["learned"]
    return (
        f"not learned in distribution: per-token accuracy {below(verdict['value'], verdict['threshold'])} "
        f"at the training length < {verdict['threshold']}; its numbers beyond training say "
        f"nothing about the encoding (more trainer.max_steps, or trainer.criterion_target)"
    )


def changed_in_distribution_message(results: dict) -> str:
    """A re-evaluation (eval.py) of a run that learned, whose own overrides bring its accuracy
    at the training length below the threshold (PI rescales every position, say)."""
    verdict = results["learned"]
    here = verdict["this_evaluation"]
    return (
        f"this evaluation's per-token accuracy at the training length is "
        f"{below(here, verdict['threshold'])} (< {verdict['threshold']}), the trained run's "
        f"{verdict['value']:.4g}: its overrides change the model in distribution too"
    )


# -- how far a run extrapolates: the length-generalisation ratio ρ_τ --------------------------
#: τ of ρ_τ by default (``eval.ratio_thresholds``; aggregation's ``--ratio-thresholds``)
RATIO_THRESHOLDS = (0.9, 0.5)
#: the headline metric of task rows (the papers' whole-answer metric); language-modelling rows,
#: where it is null, use perplexity relative to the training length (``length_ratio``)
HEADLINE_METRIC = "exact_match"


def ratio_key(threshold: float) -> str:
    """How a threshold τ names its ρ_τ in results.json and tables: 0.9 -> "0.9"."""
    return f"{threshold:g}"


def ratio_score(rows: list[dict], metric: str) -> list[float | None]:
    """The score ρ_τ compares with τ, per row (sorted by length; the first is the anchor):
    the metric itself where larger is better (accuracy, exact match); where smaller is better
    (ppl, loss, bits per byte) the anchor's value over the row's, so 1 at the anchor and, for
    perplexity, 0.9 where it is 11% above the training length's. None where a value is
    missing, not finite, or cannot be divided by."""
    values = [row.get(metric) for row in rows]
    finite = [v if isinstance(v, int | float) and math.isfinite(v) else None for v in values]
    if METRIC_DIRECTIONS.get(metric, True):
        return finite
    anchor = finite[0]
    return [None if anchor is None or not v else anchor / v for v in finite]


def length_ratio(rows: list[dict], train_len: int, threshold: float, metric: str) -> float | None:
    """ρ_τ of one protocol's rows: the largest evaluated length / ``train_len`` such that the
    score (``ratio_score``) is ≥ τ at every evaluated length from the anchor up to it.

    The anchor is the row at the training length, or the longest row below it; lengths below
    the anchor are in distribution and not part of ρ (the learned verdict judges them). A dip
    stops ρ even where the curve recovers later; a missing value counts as a failure. 0.0
    where the anchor itself fails τ (not even the training length: not learned to τ); None
    without a row at or below the training length. ρ is bounded by the longest evaluated
    length: at that bound it is a lower bound."""
    rows = sorted(rows, key=lambda row: row["length"])
    start = [i for i, row in enumerate(rows) if row["length"] <= train_len]
    if not start:
        return None
    chain = rows[start[-1] :]
    ratio = 0.0
    for row, score in zip(chain, ratio_score(chain, metric), strict=True):
        if score is None or score < threshold:
            break
        ratio = row["length"] / train_len
    return ratio


def headline_metric(rows: list[dict]) -> str:
    """``HEADLINE_METRIC`` where the rows hold it, else perplexity (language modelling)."""
    held = any(row.get(HEADLINE_METRIC) is not None for row in rows)
    return HEADLINE_METRIC if held or not rows else LM_FALLBACK_METRIC


def length_ratios(
    rows: list[dict], train_len: int, thresholds=RATIO_THRESHOLDS, metric: str | None = None
) -> dict:
    """results.json's ``length_ratio``: ρ_τ per protocol and threshold, on ``metric`` (default:
    the headline, ``headline_metric``), e.g. ``{"metric": "exact_match", "relative": false,
    "thresholds": [0.9, 0.5], "by_protocol": {"greedy": {"0.9": 1.0, "0.5": 2.0}}}``;
    ``relative``: the score is the metric at the anchor over the metric (smaller is better)."""
    metric = metric or headline_metric(rows)
    protocols = sorted({row["protocol"] for row in rows})
    return {
        "metric": metric,
        "relative": not METRIC_DIRECTIONS.get(metric, True),
        "thresholds": [float(t) for t in thresholds],
        "by_protocol": {
            protocol: {
                ratio_key(t): length_ratio(
                    [r for r in rows if r["protocol"] == protocol], train_len, t, metric
                )
                for t in thresholds
            }
            for protocol in protocols
        },
    }


def format_ratios(length_ratio: dict, train_len: int, longest: int | None = None) -> str:
    """The lines printed under a run's table: ρ_τ per protocol, "≥" where ρ reached the
    longest evaluated length (a lower bound), "0 (fails at the training length)"."""
    metric = length_ratio["metric"]
    score = f"{metric} at the training length / {metric}" if length_ratio["relative"] else metric
    lines = [
        f"length-generalisation ratio ρ_τ: the largest length / {train_len} with {score} ≥ τ "
        "at every evaluated length up to it"
    ]
    for protocol, ratios in length_ratio["by_protocol"].items():
        shown = []
        for key, ratio in ratios.items():
            text = "= –" if ratio is None else f"= {ratio:g}"
            if ratio == 0:
                text += " (fails at the training length)"
            elif ratio is not None and longest and ratio * train_len >= longest:
                text = f"≥ {ratio:g}"  # every evaluated length kept τ: a lower bound
            shown.append(f"ρ_{key} {text}")
        lines.append(f"  {protocol}: " + ", ".join(shown))
    return "\n".join(lines)


def length_unit(row: dict) -> tuple[str, str]:
    """What a results row's ``length`` counts, as (noun, unit) for labels: ("length", "input
    symbols") for tasks, ("length", "tokens") for language modelling, ("side", "cells") for
    grids and volumes, ("side", "pixels") for images cut into patches (shapes)."""
    grid = row.get("grid_shape")
    if grid:
        return "side", "cells" if row["length"] == grid[0] else "pixels"
    if row.get("accuracy") is None and row.get("ppl") is not None:
        return "length", "tokens"
    return "length", "input symbols"


def sort_rows(rows: list[dict]) -> list[dict]:
    """Rows unique per (length, protocol), sorted by length."""
    seen = {}
    for row in rows:
        seen[(row["length"], row["protocol"])] = row
    return [seen[key] for key in sorted(seen)]


def write_results(path: str | Path, results: dict) -> None:
    missing = [key for key in REQUIRED_KEYS if key not in results]
    if missing:
        raise KeyError(f"results lack required keys: {missing}")
    results = {**results, "eval": sort_rows(results["eval"])}
    atomic_write(path, json.dumps(_strict(results), indent=2, allow_nan=False) + "\n")


def unwritten(path: Path, partial: Path, error: OSError, tag: str | None) -> str:
    """The one line for results that could not be written (a disk that stays full: DF03,
    UP03) after the evaluation finished: the file, why, what is kept, how to get them."""
    kept = [
        f"the measured rows in {partial.name}" if partial.is_file() else "",
        "checkpoints/last.ckpt" if (path.parent / "checkpoints" / "last.ckpt").is_file() else "",
    ]
    kept_text = f" (kept: {' and '.join(k for k in kept if k)})" if any(kept) else ""
    again = "the same eval.py command" if tag else "resume=true with the same hydra.run.dir"
    return (
        f"{path} could not be written ({error.strerror or error}): the evaluation finished, "
        f"its results are not saved{kept_text}; allowed: free space on the disk (or make the "
        f"folder writable), then {again} evaluates it again"
    )


def _strict(value):
    """Non-finite floats (an overflowing perplexity, a diverged loss) as null, so results.json
    stays strict JSON that every parser reads (json.dumps would write Infinity / NaN)."""
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {key: _strict(item) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [_strict(item) for item in value]
    return value


def load_results(path: str | Path) -> dict:
    return json.loads(Path(path).read_text())


def format_table(rows: list[dict], train_len: int | None = None) -> str:
    """A plain-text per-length table for the terminal (language modelling: ppl and bits/byte).

    ``baseline``: accuracy / exact match of the most frequent symbol per answer position (the
    trivial predictor to beat); ``±draws``: the spread over position draws, where evaluated."""
    if any(row.get("ppl") is not None for row in rows):
        return _format_lm_table(rows)
    draws = any(row.get("position_draws", 1) > 1 for row in rows)
    header = (
        f"{'length':>8} {'in-dist':>7} {'max_pos':>8} {'n':>6} {'loss':>9} {'accuracy':>9} "
        f"{'exact':>7} {'baseline':>13}" + (f" {'±draws':>13}" if draws else "")
    )
    lines = [header, "-" * len(header)]

    def fmt(value, width, digits):
        return f"{value:>{width}.{digits}f}" if value is not None else f"{'-':>{width}}"

    for row in rows:
        baseline = (row.get("baseline_accuracy"), row.get("baseline_exact_match"))
        base = f"{fmt(baseline[0], 6, 3)} {fmt(baseline[1], 6, 3)}"
        line = (
            f"{row['length']:>8} {('yes' if row['in_distribution'] else 'no'):>7} "
            f"{row['max_position']:>8} {row['n_examples']:>6} {fmt(row['loss'], 9, 4)} "
            f"{fmt(row['accuracy'], 9, 4)} {fmt(row['exact_match'], 7, 3)} {base:>13}"
        )
        if draws:
            spread = (row.get("accuracy_draw_std"), row.get("exact_match_draw_std"))
            line += f" {fmt(spread[0], 6, 3)} {fmt(spread[1], 6, 3)}"
        lines.append(line)
    return "\n".join(lines)


def _format_lm_table(rows: list[dict]) -> str:
    header = f"{'length':>8} {'in-dist':>7} {'protocol':>10} {'stride':>6} {'tokens':>8} {'loss':>8} {'ppl':>10} {'bpb':>7}"
    lines = [header, "-" * len(header)]
    for row in rows:
        bpb = row.get("bits_per_byte")
        lines.append(
            f"{row['length']:>8} {('yes' if row['in_distribution'] else 'no'):>7} "
            f"{row['protocol']:>10} {row.get('stride') or '-':>6} {row.get('tokens_scored', 0):>8} "
            f"{row['loss']:>8.4f} {row['ppl']:>10.3f} {bpb if bpb is None else f'{bpb:.4f}':>7}"
        )
    return "\n".join(lines)


# -- reading runs back (scripts/aggregate.py, scripts/plot.py) ---------------------------------
RESULTS_NAME = "results.json"
CONFIG_NAME = "config.yaml"
#: metrics a results row may carry, and whether a larger value is better
METRIC_DIRECTIONS = {
    "accuracy": True,
    "exact_match": True,
    "loss": False,
    "ppl": False,
    "bits_per_byte": False,
}
#: what a task metric falls back to on language-modelling rows (where it is null)
LM_FALLBACK_METRIC = "ppl"


def results_name(tag: str | None = None) -> str:
    """``results.json``, or ``results.<tag>.json`` for an ``eval.py`` re-evaluation."""
    return RESULTS_NAME if tag is None else f"results.{tag}.json"


def result_tags(run_dir: str | Path) -> list[str]:
    """Tags of the re-evaluation files (``results.<tag>.json``) in a run directory, sorted."""
    names = (p.name for p in Path(run_dir).glob("results.*.json"))
    return sorted(name[len("results.") : -len(".json")] for name in names)


def schema_problems(results) -> list[str]:
    """What makes a loaded results.json unusable: missing keys, malformed rows ([] if none)."""
    if not isinstance(results, dict):
        return [f"not a JSON object but {type(results).__name__}"]
    problems = [f"missing key {key!r}" for key in REQUIRED_KEYS if key not in results]
    wrong = [
        key for key, fits in RESULTS_TYPES.items() if key in results and not fits(results[key])
    ]
    if wrong:
        problems.append(f"values of the wrong type in {wrong}")
    rows = results.get("eval")
    if "eval" in results and not isinstance(rows, list):
        problems.append("'eval' is not a list")
    elif isinstance(rows, list):
        for index, row in enumerate(rows):
            if not isinstance(row, dict):
                problems.append(f"eval[{index}] is not an object")
                continue
            missing = [key for key in ROW_KEYS if key not in row]
            if missing:
                problems.append(f"eval[{index}] lacks {missing}")
            elif wrong := [key for key, fits in ROW_TYPES.items() if not fits(row[key])]:
                problems.append(f"eval[{index}] has values of the wrong type in {wrong}")
    return problems


def _is_int(value) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _is_metric(value) -> bool:
    return value is None or (isinstance(value, int | float) and not isinstance(value, bool))


#: what the required keys that name a run must hold (a null or mapping seed crashed aggregation)
RESULTS_TYPES = {
    **{key: lambda value: isinstance(value, str) for key in ("pe", "model", "task")},
    **{key: _is_int for key in ("train_len", "seed", "n_params")},
    "train_tokens": lambda value: _is_int(value) or isinstance(value, float),
}
#: what each required row key must hold (a string length or metric crashed aggregation's sort)
ROW_TYPES = {
    "length": _is_int,
    "in_distribution": lambda value: isinstance(value, bool),
    "max_position": lambda value: value is None or _is_int(value),
    "protocol": lambda value: isinstance(value, str),
    "n_examples": lambda value: value is None or _is_int(value),
    **{key: _is_metric for key in ("loss", "accuracy", "exact_match", "ppl")},
}
