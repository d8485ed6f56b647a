"""The block options' config, without torch (``model.attn_gate``, ``attn_sinks``, ``kv_bias``,
``qk_norm``, ``attn_fn``): their fields are ``lengen.model.config.ModelConfig``'s, named and
defaulted there once; this module holds their allowed values, the one value the layers receive
(``AttentionOptions``) and the checks that read several of them. The torch side is
``lengen.model.block_options``; docs/models.md, "Where attention mass goes"."""

from __future__ import annotations

import dataclasses

#: ``model.attn_gate``: a sigmoid gate on the attention output per head or per element
ATTN_GATES = ("none", "headwise", "elementwise")
#: ``model.attn_fn``: softmax, or unnormalised sigmoid with the bias −log n (a control)
ATTN_FNS = ("softmax", "sigmoid")


@dataclasses.dataclass(frozen=True)
class AttentionOptions:
    """The block options as every self-attention layer of the model receives them; all off is
    the plain layer, with no parameter and no operation added."""

    gate: str = "none"
    sinks: bool = False
    kv_bias: bool = False
    qk_norm: bool = False
    fn: str = "softmax"

    @property
    def extra_keys(self) -> int:
        """Keys every query sees beside the sequence's: a learned sink, a learned key bias."""
        return int(self.sinks) + int(self.kv_bias)

    @property
    def changes_attention(self) -> bool:
        """The weights themselves change (a path of ``block_options``, not ``attend`` alone)."""
        return self.extra_keys > 0 or self.fn != "softmax"


def logit_option(options: AttentionOptions) -> str | None:
    """The block option, as ``key=value``, that acts on the softmax's plain logits (a key
    column: sinks, key/value biases; the sigmoid in its place), or None: an encoding without
    such logits (one that computes attention itself, or reads them from q·k) refuses it, before
    torch (``lengen.pe.config.base.EncodingConfig.check_plain_logits``) and at build
    (``lengen.model.block_options.check_encoding``)."""
    if not options.changes_attention:
        return None
    if options.fn != "softmax":
        return f"model.attn_fn={options.fn}"
    return "model.attn_sinks=true" if options.sinks else "model.kv_bias=true"


def attention_options(cfg) -> AttentionOptions:
    """The block options of a model config (``ModelConfig``)."""
    return AttentionOptions(cfg.attn_gate, cfg.attn_sinks, cfg.kv_bias, cfg.qk_norm, cfg.attn_fn)


def check_attention_options(cfg) -> None:
    """Refuse, in one line naming the key, options that cannot act together or at all."""
    # a sink or a key bias takes mass from a normalisation that sigmoid attention lacks
    for key in ("attn_sinks", "kv_bias"):
        if getattr(cfg, key) and cfg.attn_fn == "sigmoid":
            raise ValueError(
                f"model.{key}: an extra key takes softmax mass, and model.attn_fn=sigmoid has "
                f"no normalisation to take it from; allowed: model.{key}=false, or "
                f"model.attn_fn=softmax"
            )
    if attention_options(cfg) != AttentionOptions() and all(
        plan.recurrent for plan in cfg.mixer_plans()
    ):
        key = "model.mixers" if cfg.mixers is not None else "model.mixer"
        raise ValueError(
            f"{key}: every layer is recurrent, so the attention options (model.attn_gate, "
            f"attn_sinks, kv_bias, qk_norm, attn_fn) would change nothing; allowed: their "
            f"defaults, or an attention layer in {key}"
        )


def option_parameters(cfg) -> int:
    """The parameters the block options add to one self-attention layer (``parameter_sizes``):
    the gate's linear map (d·H + H headwise, d² + d elementwise), a sink per head, a key and
    a value per head (2·d), a gain per channel of a head's queries and keys (2·d / H)."""
    d_model, heads = cfg.d_model, cfg.n_heads
    gate = {
        "none": 0,
        "headwise": d_model * heads + heads,
        "elementwise": d_model * d_model + d_model,
    }
    return (
        gate[cfg.attn_gate]
        + heads * cfg.attn_sinks
        + 2 * d_model * cfg.kv_bias
        + 2 * (d_model // heads) * cfg.qk_norm
    )
