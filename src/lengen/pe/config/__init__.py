"""Every encoding's config, without torch: one module per encoding module, beside it.

The encoding ``lengen.pe.<module>.<Class>`` keeps its config in ``lengen.pe.config.<module>``
as ``<Class>Config`` (``lengen.pe.rope.RoPE`` -> ``lengen.pe.config.rope.RoPEConfig``), so that
the early layer finds it from the yaml's ``_target_`` and imports it without importing the
encoding, and torch with it. ``base`` holds what every config shares (``EncodingConfig``, the
run an encoding is told about, the lookup below); docs/pe.md "Adding an encoding".
"""

from __future__ import annotations

from lengen.pe.config.base import (
    EncodingConfig,
    EncodingContext,
    check_encoding,
    config_class,
    config_of,
    encoding_target,
    grid_encodings,
    pe_config_dir,
)

__all__ = [
    "EncodingConfig",
    "EncodingContext",
    "check_encoding",
    "config_class",
    "config_of",
    "encoding_target",
    "grid_encodings",
    "pe_config_dir",
]
