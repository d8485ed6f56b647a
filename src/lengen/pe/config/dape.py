"""DAPE's config (``lengen.pe.dape``: an MLP over the logits and a bias encoding's bias),
without torch. The wrapped encoding is named as ``pe=`` names it and checked by its own config."""

from __future__ import annotations

import dataclasses
from typing import ClassVar

from lengen.pe.config.base import (
    DistanceBiasConfig,
    EncodingContext,
    added,
    config_class,
    encoding_target,
    wrapped_keys,
    wrapped_options,
)
from lengen.schema import integer, one_of, option

#: ``pe.bias``: the bias encodings DAPE wraps (the paper's three), each named as ``pe=`` names
#: it (its class is configs/pe/<name>.yaml's ``_target_``)
DAPE_BIASES = ("alibi", "kerple", "fire")
#: ``reference``: x + B + f([x; B]) (the authors' code); ``paper``: x + f([x; B])
DAPE_FORMS = ("reference", "paper")


_bias_options = wrapped_options("bias", "variant: power")


@dataclasses.dataclass(frozen=True)
class DAPEConfig(DistanceBiasConfig):
    contextual_logits: ClassVar[bool] = True  # its MLP reads the logits (lengen.pe.dape)
    bias: str = option("alibi", one_of(*DAPE_BIASES))
    bias_options: dict | None = option(None, _bias_options)
    mlp_width: int = option(32, integer())
    form: str = option("reference", one_of(*DAPE_FORMS))

    #: DAPE's options that the wrapped encoding shares, so both see one set of positions; the
    #: others every encoding takes (temperatures, windows) act in DAPE's attention, not in B
    POSITION_KEYS: ClassVar[tuple[str, ...]] = (
        "randomized",
        "max_position",
        "randomized_eval",
        "randomized_relative",
    )

    def parameter_sizes(self, context: EncodingContext) -> dict[str, int]:
        heads = context.n_heads  # W₁ (mlp_width, 2H) and W₂ (H, mlp_width), with biases
        return {"pe.mlp_width": self.mlp_width * (3 * heads + 1) + heads}

    def activation_sizes(self, context: EncodingContext, batch: int, tokens: int) -> dict[str, int]:
        # the hidden layer (B, mlp_width, T, T) before and after its activation, and a
        # channels-last copy (``lengen.pe.dape``'s score_copies)
        base = super().activation_sizes(context, batch, tokens)
        return added(base, {"pe.mlp_width": 4 * batch * tokens * tokens * self.mlp_width})

    def bias_keys(self) -> dict:
        """The keywords of the wrapped encoding: its own options (``pe.bias_options``) and
        DAPE's positional options (``POSITION_KEYS``)."""
        return wrapped_keys(self, "bias_options", DistanceBiasConfig)

    def bias_target(self) -> str:
        """The class of the wrapped encoding: ``_target_`` of configs/pe/<pe.bias>.yaml."""
        return encoding_target(self.bias, "pe.bias")

    def check_own(self, context: EncodingContext) -> dict:
        """-> the wrapped encoding's keywords, checked by its config class (keys named
        ``pe.bias_options.<key>``)."""
        target = self.bias_target()
        wrapped = config_class(target)
        nested = type(wrapped.__name__, (wrapped,), {"prefix": "pe.bias_options"})
        keys = self.bias_keys()
        owner = target.rpartition(".")[2]
        nested.from_keys(keys, owner=owner).check(context, owner)
        return keys
