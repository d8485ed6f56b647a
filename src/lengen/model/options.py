"""What the early checks need to know of the models, without importing torch.

A refused command line must not pay for ``import torch`` (docs/benchmarks.md, "Refused
commands"); the model classes are ``torch.nn.Module``s, so the facts and the one check the
early layer (``lengen.build.check_components``) needs of them live here, and the classes read
theirs from here.
"""

from __future__ import annotations

from collections.abc import Mapping

from lengen.checks import positive_int

#: ``model.attention`` choices: ``auto`` picks among SDPA paths (``lengen.model.kernels``);
#: ``flex`` sends relative biases at full passes to FlexAttention.
KERNELS = ("auto", "flex")

#: model class name -> the model kind its data is laid out for (the classes' ``kind``)
KINDS = {"DecoderOnly": "decoder", "EncoderOnly": "encoder", "EncoderDecoder": "encoder_decoder"}


#: model kind -> causality of each stack with an encoding of its own, as the classes build them
#: (an encoder–decoder's encoder is bidirectional, its decoder causal)
STACKS = {"decoder": (True,), "encoder": (False,), "encoder_decoder": (False, True)}


def kind_of(target: str) -> str | None:
    """The model kind of a ``_target_`` naming a model shipped with lengen, else None."""
    return KINDS.get(target.rpartition(".")[2])


def check_attention_option(option) -> None:
    """``model.attention`` is one of ``KERNELS`` (ValueError naming the key)."""
    if option not in KERNELS:
        raise ValueError(f"model.attention must be one of {', '.join(KERNELS)}; got {option!r}")


def check_model(node: Mapping) -> None:
    """The model keys the config layer (``lengen.config.validate``) does not check: the
    attention option and an encoder–decoder's decoder depth (ValueError naming the key)."""
    check_attention_option(node.get("attention", "auto"))
    if node.get("n_decoder_layers") is not None:
        positive_int("model.n_decoder_layers", node["n_decoder_layers"])
