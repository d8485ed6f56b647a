"""The longest evaluation a run starts without being asked to: above it, a run is refused
before training, in one line with its estimate (``lengen.estimate``) and how to allow it.

``pe=stick_breaking eval.lengths=[8,30000]`` under ``debug=fast`` printed "evaluation
10h02m" and then evaluated in silence for ten hours (the hostile trial's O15, O15b, O16): a
forgotten zero, not an experiment. The bound: an evaluation estimated at more than
``LENGEN_MAX_EVAL_HOURS`` hours (default 1) *and* longer than the run's training (eval.py,
which trains nothing: the hours alone). A study
whose evaluation outlasts an hour of its training is the rare, deliberate case; it sets the
variable (``LENGEN_MAX_EVAL_HOURS=24``, or ``inf`` for no bound)."""

from __future__ import annotations

import math
import os

from lengen.errors import ConfigError
from lengen.estimate import duration

#: the environment variable that sets the bound, in hours (module docstring)
MAX_EVAL_HOURS_VARIABLE = "LENGEN_MAX_EVAL_HOURS"
#: the bound where the variable is not set
MAX_EVAL_HOURS = 1.0


def max_eval_seconds() -> float:
    """``$LENGEN_MAX_EVAL_HOURS`` in seconds (hours > 0, ``inf`` allowed), else the default.
    Raises ValueError naming the variable."""
    text = os.environ.get(MAX_EVAL_HOURS_VARIABLE, "").strip()
    if not text:
        return MAX_EVAL_HOURS * 3600
    try:
        hours = float(text)
    except ValueError:
        hours = math.nan
    if not hours > 0:  # NaN too
        raise ValueError(
            f"{MAX_EVAL_HOURS_VARIABLE}={text}: allowed: a number of hours > 0, or inf"
        )
    return hours * 3600


def long_evaluation_refusal(parts: dict, steps: int, key: str, also: str = "") -> str | None:
    """The refusal of an evaluation too long to start unasked, or None. ``parts``:
    ``Estimate.parts``'s (seconds at the load now); ``steps``: the training steps to come;
    ``key``: the option that sets the lengths (``eval.lengths`` or ``eval.factors``); ``also``:
    another option that shrinks it (``a smaller model.loop_extra``), listed first."""
    bound = max_eval_seconds()
    evaluate, training = parts["evaluate"], steps * parts["step"]
    if not (evaluate > bound and evaluate > training):
        return None
    guessed = any(part.endswith("evaluation") for part in parts["guessed"])
    rough = " (a rough estimate: nothing like it measured here)" if guessed else ""
    than = f"training ({duration(training)}) and than " if steps else ""  # eval.py: none
    return (
        f"{key}: the evaluation is estimated at {duration(evaluate)}{rough}, longer than "
        f"{than}{MAX_EVAL_HOURS_VARIABLE}={bound / 3600:g} h; allowed: {also + ', ' if also else ''}"
        f"shorter {key} or fewer "
        f"eval.samples, or {MAX_EVAL_HOURS_VARIABLE}=<hours> (inf: no bound) to run it"
    )


def check_evaluation_time(cfg, parts: dict, steps: int) -> None:
    """Refuse (ConfigError) a run whose evaluation is too long to start unasked."""
    key = "eval.lengths" if cfg.eval.get("lengths") is not None else "eval.factors"
    model = cfg.get("model") or {}
    # the confidence rule scores every count up to the linear one + loop_extra (KB23)
    also = "a smaller model.loop_extra" if model.get("loop_rule") == "confidence" else ""
    try:
        refusal = long_evaluation_refusal(parts, steps, key, also)
    except ValueError as error:
        raise ConfigError(str(error)) from None
    if refusal is not None:
        raise ConfigError(refusal)


def check_reevaluation_time(cfg, model, data, lengths, device: str, passes=None) -> str:
    """eval.py's evaluation estimate (no training follows, so the bound alone decides): the
    line it prints -> ``estimate: ≈ …``; ConfigError where the evaluation is too long to start
    unasked. ``model``: the rebuilt torch module; ``data``: its data source; ``passes``: tokens
    -> the model's passes over a sequence (``lengen.model.looped.evaluation_passes``; the
    caller's, this layer being below the model's)."""
    from lengen.caches import calibration_file
    from lengen.estimate import Estimate, eval_flops, machine_key, mechanism_key

    n_params = sum(p.numel() for p in model.parameters())
    sizes = (n_params, int(cfg.model.n_layers), int(cfg.model.d_model))
    samples = int(cfg.eval.get("samples") or 1)
    evaluation = eval_flops(
        *sizes,
        samples,
        [data.sequence_length(n) for n in lengths],
        passes=passes,
    )
    protocol = str(cfg.eval.get("decoding") or "teacher_forced")
    estimate = Estimate(calibration_file(), machine_key(device), device, mechanism_key(cfg))
    parts = estimate.parts(0, 0.0, evaluation, protocol, len(lengths))
    check_evaluation_time(cfg, parts, steps=0)
    rough = " (rough)" if any(p.endswith("evaluation") for p in parts["guessed"]) else ""
    return f"estimate: ≈ {duration(parts['evaluate'])} of evaluation{rough}"
