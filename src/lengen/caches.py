"""Where lengen's caches go: lengen's own folder, not the home or temporary folder.

``use_lengen_caches()`` runs first in every entry point (train.py, eval.py, scripts/*.py),
before anything imports matplotlib or torch; values the user set are kept. docs/scaling.md,
"Where lengen writes", lists every location.
"""

from __future__ import annotations

import os


def lengen_cache_dir() -> str:
    """``$LENGEN_CACHE_DIR``, else ``~/.cache/lengen``."""
    return os.path.expanduser(os.environ.get("LENGEN_CACHE_DIR") or "~/.cache/lengen")


def use_lengen_caches() -> None:
    """matplotlib's font cache and torch.compile's (inductor's) kernels under lengen's cache."""
    os.environ.setdefault("MPLCONFIGDIR", os.path.join(lengen_cache_dir(), "matplotlib"))
    os.environ.setdefault("TORCHINDUCTOR_CACHE_DIR", os.path.join(lengen_cache_dir(), "inductor"))
