"""Transformer models: decoder-only, encoder-only and encoder–decoder.

The classes load on first use (PEP 562): ``import lengen.model`` imports no torch. Their
typed configs are ``lengen.options``'s ``<Class>Config``.
"""

from __future__ import annotations

import importlib

__all__ = ["DecoderOnly", "EncoderDecoder", "EncoderOnly"]


def __getattr__(name: str):
    if name in __all__:
        return getattr(importlib.import_module("lengen.model.transformer"), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted([*globals(), *__all__])
