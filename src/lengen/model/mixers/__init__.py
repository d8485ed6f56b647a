"""Sequence mixers: what a block uses in place of (or beside) softmax attention.

A block mixes its tokens with one mixer (``model.mixer``, or per layer ``model.mixers``
cycled over the stack, as ``pe.layers`` cycles encodings); ``attention`` is today's layer
(``lengen.model.attention``) and the default. The others are recurrent: gated linear attention
(``gla``), DeltaNet (``deltanet``), Gated DeltaNet (``gated_deltanet``) and an LSTM
(``lstm``), each one file here, its typed config in ``lengen.model.mixers.config.<module>``
and its yaml in ``configs/model/mixer/<name>.yaml`` (docs/models.md).

This package imports no torch: the pre-check reads the configs through it.
"""
