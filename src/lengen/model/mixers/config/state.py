"""The recurrent mixers' training interventions on their state, without torch (Buitrago Ruiz &
Gu, ICML 2025, "Understanding and Improving Length Generalization in Recurrent Models", arXiv
2507.02782; docs/models.md "Training the state"). The mechanism is ``lengen.model.mixers.state``.

Every option is off by default: the mixer trains from a zero state with full backpropagation,
as before the options existed. Each is a mixer option (``model.mixer={mixer: gla, state_init:
passing}``, or per entry of ``model.mixers``), so it lives in the mixer's yaml, not in the
composed config: a run that does not set one keeps its run id.
"""

from __future__ import annotations

import dataclasses

from lengen.model.mixers.config.base import MixerConfig
from lengen.schema import integer, number, one_of, option

#: the initial state h₋₁ of every training sequence: ``zero`` (as before), ``noise`` (the
#: paper's Random Noise: i.i.d. N(0, σ²), one σ for every layer and head), ``fitted_noise``
#: (its Fitted Noise: i.i.d. Gaussian per head with the mean and std of the last training
#: batch's final states), ``passing`` (its State Passing: the previous training batch's final
#: states, detached)
STATE_INITS = ("zero", "noise", "fitted_noise", "passing")


@dataclasses.dataclass(frozen=True)
class RecurrentStateConfig(MixerConfig):
    """Options of a mixer that carries a state: how training starts and truncates it."""

    #: the initial state of every training sequence (STATE_INITS); evaluation, validation and
    #: decoding always start from zero
    state_init: str = option("zero", one_of(*STATE_INITS))
    #: σ of state_init=noise (the paper's "chosen standard deviation"; no default: the stored
    #: copies give no value to copy); null otherwise
    state_noise_std: float | None = option(None, number(above=0.0, nullable=True))
    #: truncated backpropagation through time: the gradient stops at every this many tokens
    #: of a training sequence while the state passes on; null: full backpropagation
    tbptt: int | None = option(None, integer(nullable=True))

    def __post_init__(self) -> None:
        # one rule across two options, refused as the single ones are (ValueError, one line)
        noisy = self.state_init == "noise"
        if noisy and self.state_noise_std is None:
            raise ValueError(
                f"{self.key('state_noise_std')}: state_init=noise draws the initial state from "
                f"N(0, σ²) and needs σ; allowed: a number > 0 (e.g. state_noise_std: 0.1)"
            )
        if not noisy and self.state_noise_std is not None:
            raise ValueError(
                f"{self.key('state_noise_std')}={self.state_noise_std} would change nothing "
                f"with state_init={self.state_init}; allowed: null, or state_init=noise"
            )


def check_state_with_loops(plans, looped: bool, key: str = "model.mixer") -> None:
    """Refuse ``passing`` and ``fitted_noise`` in a looped stack (``model.loops``): a layer runs
    K times per batch there, so "the previous batch's final state" of a layer is not one
    state (each loop would start from the loop before it). ``plans``: the model's MixerPlans."""
    if not looped:
        return
    for plan in plans:
        init = plan.keywords.get("state_init", "zero")
        if init in ("passing", "fitted_noise"):
            raise ValueError(
                f"{key}: state_init={init} ({plan.name}) keeps one final state per layer between "
                f"training batches, and a looped stack (model.loops / model.loop_rule) runs each "
                f"layer several times per batch; allowed: state_init zero or noise, tbptt, or "
                f"model.loops=1 with loop_rule=fixed"
            )


def kept_state_entry(mixer, mixers) -> tuple[str, str] | None:
    """The first ``model.mixer`` / ``model.mixers`` entry (as written, no torch, no yaml read)
    whose ``state_init`` is not zero -> (its key, its state_init); None without one. For the
    pack's refusal (``lengen.packable``): noise comes from one generator under the pack's map
    over members, and a state kept between batches would be one module's for every member."""
    entries = [("model.mixer", mixer)]
    if mixers is not None and not isinstance(mixers, (str, bytes)):
        entries = [(f"model.mixers.{index}", entry) for index, entry in enumerate(mixers)]
    for key, entry in entries:
        init = entry.get("state_init", "zero") if hasattr(entry, "get") else "zero"
        if init != "zero":
            return key, str(init)
    return None
