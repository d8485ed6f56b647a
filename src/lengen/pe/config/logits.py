"""Block options that act on the softmax's plain logits (``model.attn_sinks``, ``kv_bias``: a
key column; ``model.attn_fn=sigmoid``: the sigmoid in its place) against encodings that have
none: those that compute attention themselves (FoX, stick-breaking, PaTH, RoPE's
``pe.extension`` arms) or read their logits from q·k (CoPE, DAPE). Refused by the encoding's
typed config before torch (``EncodingConfig.check``, from ``EncodingContext.logit_option``)
and, in the same words, at build (``lengen.model.block_options.check_encoding``)."""

from __future__ import annotations


def plain_logits_refusal(option: str, name: str, why: str) -> str:
    """The one line refusing block option ``option`` (``key=value``) with encoding ``name``
    (``why``: what it does instead of plain logits)."""
    return (
        f"{option}: pe={name} {why}, so it has no logits to add a key column to or to pass "
        f"through a sigmoid; allowed: {option.partition('=')[0]}'s default, or an encoding "
        f"with plain logits (nope, rope, alibi, t5, fire, …)"
    )


def check_plain_logits(config, context, name: str) -> None:
    """Refuse (ValueError) ``context.logit_option`` with an encoding config that has no plain
    logits (the build refused it after the model was made, a run folder left)."""
    if context.logit_option is None:
        return
    why = config.attends_itself() or ("reads its logits from q·k" * config.contextual_logits)
    if why:
        raise ValueError(plain_logits_refusal(context.logit_option, name, why))
