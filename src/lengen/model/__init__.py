"""Transformer models: decoder-only, encoder-only and encoder–decoder."""

from lengen.model.transformer import DecoderOnly, EncoderDecoder, EncoderOnly

__all__ = ["DecoderOnly", "EncoderDecoder", "EncoderOnly"]
