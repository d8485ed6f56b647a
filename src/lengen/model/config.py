"""The model's typed configs, without torch (``configs/model/<kind>.yaml``): each class's
fields are the keys of its yaml with their one default and rule (``tests/test_configs.py``
compares them). Beside the model classes (``lengen.model.transformer``), each of which names
its config in ``Options``; the pre-check and the data layer (a text window's layout depends on
the model kind) find a lengen model's config here by its ``_target_`` (``model_config``), with
no torch imported: ``lengen.model`` loads its classes on first use.
"""

from __future__ import annotations

import dataclasses
from typing import ClassVar

from lengen.checks import check_heads
from lengen.model.block_config import (
    ATTN_FNS,
    ATTN_GATES,
    check_attention_options,
    option_parameters,
)
from lengen.model.canon_config import canon_parameters, canon_points, check_canon_reaches
from lengen.model.mixers.config.base import (
    MixerPlan,
    layer_plans,
    mixer_entries,
    mixer_entry,
    plan_mixers,
)
from lengen.model.mixers.config.state import check_state_with_loops
from lengen.schema import Config, flag, integer, interval, one_of, option

#: ``model.attention``: ``auto`` picks among SDPA paths (``lengen.model.kernels``); ``flex``
#: sends relative biases at full passes to FlexAttention
KERNELS = ("auto", "flex")
#: ``model.loop_rule``: how many times the weight-tied blocks run at a sequence of T tokens
#: (``loop_count``; lengen.model.looped, docs/models.md "Looped depth"); ``confidence``
#: trains at the linear count and picks each evaluated length's count by Fan et al.'s adaptive
#: stopping (lengen.evaluation.loop_choice)
LOOP_RULES = ("fixed", "linear", "confidence")


@dataclasses.dataclass(frozen=True)
class ModelConfig(Config):
    """A model's keys (``configs/model/<kind>.yaml``); the decoder's config, and the keys a
    user's model is checked for (``lengen.preflight.validate``)."""

    prefix: ClassVar[str] = "model"
    #: the data layout the model reads (``decoder``, ``encoder``, ``encoder_decoder``)
    kind: ClassVar[str] = "decoder"
    #: the causality of each stack with an encoding of its own, as the classes build them
    stacks: ClassVar[tuple[bool, ...]] = (True,)

    d_model: int = option(128, integer())
    n_layers: int = option(2, integer())
    n_heads: int = option(4, integer())
    d_ff: int = option(512, integer())
    dropout: float = option(0.0, interval(0.0, 1.0, open_high=True))
    #: share the input embedding and the output projection (T5's output scaling)
    tie_embeddings: bool = option(False, flag())
    #: torch.compile the training forward (applied by lengen.lit)
    compile: bool = option(False, flag())
    attention: str = option("auto", one_of(*KERNELS))
    #: every layer's sequence mixer: a name of configs/model/mixer/ or {mixer: <name>, …}
    mixer: str | dict = option("attention", mixer_entry)
    #: a mixer per layer, cycled over each stack as pe.layers is (null: model.mixer everywhere)
    mixers: tuple | None = option(None, mixer_entries)
    #: K: the stack's blocks run K times with tied weights (1: no loop, the model as before)
    loops: int = option(1, integer())
    #: fixed: K loops at every length; linear: ceil(K · T / T_train) at T tokens
    loop_rule: str = option("fixed", one_of(*LOOP_RULES))
    #: loop_rule=confidence: counts tried past the linear one at each length (Fan et al.: 20)
    loop_extra: int = option(20, integer(minimum=0))
    #: Canon layers (lengen.model.canon): the points A–D as letters ("ABCD", [A, C]); "": none
    canon: str = option("", canon_points)
    #: where attention mass goes (lengen.model.block_options, docs/models.md): Qiu et al.'s
    #: output gate, gpt-oss's sinks, Gu et al.'s key/value bias, QK-norm, sigmoid attention
    attn_gate: str = option("none", one_of(*ATTN_GATES))
    attn_sinks: bool = option(False, flag())
    kv_bias: bool = option(False, flag())
    qk_norm: bool = option(False, flag())
    attn_fn: str = option("softmax", one_of(*ATTN_FNS))

    @property
    def looped(self) -> bool:
        """Whether the stacks loop (lengen.model.looped): K > 1, or a count that grows."""
        return self.loops > 1 or self.loop_rule != "fixed"

    def loop_count(self, tokens: int, train_tokens: int | None) -> int:
        """The loop count at a sequence of ``tokens`` tokens, ``train_tokens`` being the
        training sequence's (``pe.train_positions``): K under ``fixed``; under ``linear``
        ceil(K · tokens / train_tokens), never below 1 (so K at the training length); under
        ``confidence`` the linear count too: Fan et al. train at the count tied to the length
        (looped-tf ``src/train.py``: ``states[batch_num[t].item()-1]``) and choose another only
        when evaluating (``lengen.evaluation.loop_choice``)."""
        if self.loop_rule == "fixed":
            return self.loops
        if train_tokens is None:
            raise ValueError(
                f"model.loop_rule={self.loop_rule} scales the loop count by the training length, and this "
                "model was built without one (pe's train_positions); allowed: loop_rule=fixed, "
                "or a model built by the run"
            )
        return max(1, -(-self.loops * tokens // train_tokens))  # integer ceil

    def check(self) -> None:
        check_heads(self.d_model, self.n_heads)
        check_attention_options(self)  # model.attn_gate, attn_sinks, … (block_config)
        plans = self.mixer_plans()
        mixer_key = "model.mixers" if self.mixers is not None else "model.mixer"
        check_state_with_loops(plans, self.looped, mixer_key)  # state passed between batches
        if self.loop_rule == "confidence" and len(self.stacks) > 1:
            # two stacks loop over sequences of other lengths: one count per row cannot say
            # both (rows record none for this kind, lengen.model.looped.loop_facts)
            raise ValueError(
                f"model.loop_rule=confidence chooses one loop count per evaluated length, and "
                f"model={self.kind}'s two stacks loop over sequences of other lengths; allowed: "
                f"model=decoder or model=encoder, or loop_rule=fixed / linear"
            )
        if "B" in self.canon:  # (layer_plans warns of a short stack: only when it matters)
            attends = [not plan.recurrent for plan in layer_plans(plans, self.n_layers)]
            check_canon_reaches(self.canon, attends)
        recurrent = next((plan.name for plan in plans if plan.recurrent), None)
        if recurrent is not None and not all(self.stacks):
            key = "model.mixers" if self.mixers is not None else "model.mixer"
            raise ValueError(
                f"{key}: {recurrent} reads the tokens left to right, so it serves causal stacks "
                f"only, and model={self.kind} has a bidirectional one; allowed: attention, or "
                f"model=decoder"
            )

    def check_loop_choice(self, evaluation_kind: str, axes: int) -> None:
        """Refuse ``loop_rule=confidence`` where its choice cannot be made: the data's scoring
        (``evaluation_kind``: text has no answer positions, every token is scored) and its
        position axes (grids: the linear count it starts from counts tokens against the
        training sequence's, and grids size positions per axis)."""
        if self.loop_rule != "confidence":
            return
        if evaluation_kind != "tasks":
            raise ValueError(
                "model.loop_rule=confidence scores its confidence on a task's answer positions, "
                "and this data source has none (language modelling scores every token); "
                "allowed: a task (data=copy, parity, …), or loop_rule=fixed / linear"
            )
        if axes > 1:
            raise ValueError(
                "model.loop_rule=confidence starts from the linear count, which counts a "
                "sequence's tokens against the training sequence's, and grids size positions "
                "per axis; allowed: loop_rule=fixed on grids"
            )

    def layer_counts(self) -> tuple[int, int]:
        """(layers, of which with cross-attention) over every stack of the model."""
        return self.n_layers, 0

    def parameter_sizes(self, vocab_size: int, vocab_key: str) -> dict[str, int]:
        """The model's parameters (the encoding's aside) by the key that sizes them, an upper
        bound within a few percent for attention layers: the embedding and the output head
        (vocab × d_model each; once when tied), per layer 4·d² (q, k, v, output), 2·d·d_ff
        (the MLP) and biases and norms (≤ 9·d + d_ff), 4·d² more for cross-attention, and
        each stack's final norm and scales (≤ 4·d). Other
        mixers (``model.mixer``) are counted as attention: within a small factor of theirs."""
        d_model, d_ff = self.d_model, self.d_ff
        layers, crossed = self.layer_counts()
        embeddings = (1 if self.tie_embeddings else 2) * vocab_size * d_model
        canon_d_model, canon_d_ff = canon_parameters(self.canon, d_model, d_ff)  # model.canon
        return {
            vocab_key: embeddings,
            "model.d_model": layers * (4 * d_model * d_model + 9 * d_model)
            + crossed * (4 * d_model * d_model + 4 * d_model)
            + len(self.stacks) * 4 * d_model
            + layers * option_parameters(self)  # model.attn_gate, attn_sinks, … (block_config)
            + layers * canon_d_model,
            "model.d_ff": layers * (2 * d_model * d_ff + d_ff + canon_d_ff),
        }

    def mixer_plans(self) -> list[MixerPlan]:
        """Each entry's mixer, checked (``lengen.model.mixers.config.base``): layer i of a
        stack uses plan i mod len(plans)."""
        return plan_mixers(self.mixer, self.mixers)


@dataclasses.dataclass(frozen=True)
class DecoderOnlyConfig(ModelConfig):
    pass


@dataclasses.dataclass(frozen=True)
class EncoderOnlyConfig(ModelConfig):
    kind: ClassVar[str] = "encoder"
    stacks: ClassVar[tuple[bool, ...]] = (False,)


@dataclasses.dataclass(frozen=True)
class EncoderDecoderConfig(ModelConfig):
    # the encoder is bidirectional, the decoder causal
    kind: ClassVar[str] = "encoder_decoder"
    stacks: ClassVar[tuple[bool, ...]] = (False, True)
    #: the decoder's depth; null: n_layers
    n_decoder_layers: int | None = option(None, integer(nullable=True))

    def layer_counts(self) -> tuple[int, int]:
        decoder = self.n_decoder_layers if self.n_decoder_layers is not None else self.n_layers
        return self.n_layers + decoder, decoder  # every decoder layer attends to the encoder


def model_config(target: str | None) -> type[ModelConfig] | None:
    """The config class of a lengen model's ``_target_`` (``lengen.model.DecoderOnly`` or
    ``lengen.model.transformer.DecoderOnly``): ``<Class>Config`` in this module, as each
    encoding's config is ``<Class>Config`` in its own module; None for a user's model."""
    if not isinstance(target, str) or not target.startswith("lengen.model."):
        return None
    found = globals().get(target.rpartition(".")[2] + "Config")
    return found if isinstance(found, type) and issubclass(found, ModelConfig) else None
