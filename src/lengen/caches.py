"""Where lengen's caches go: lengen's own folder, not the home or temporary folder.

``use_lengen_caches()`` runs first in every entry point (train.py, eval.py, scripts/*.py),
before anything imports matplotlib or torch; values the user set are kept. ``cache_refusal()``
then asks, before anything is written, whether those folders can be made: torch creates its
compile cache at import, and an unwritable one ended the run there with a traceback, after its
directory existed. docs/scaling.md, "Where lengen writes", lists every location; lengen's own
folder also holds the machine's timing calibration (``calibration_file``).
"""

from __future__ import annotations

import os
from pathlib import Path

#: the caches of the libraries lengen imports, each kept under lengen's unless the user set it
LIBRARY_CACHES = {"MPLCONFIGDIR": "matplotlib", "TORCHINDUCTOR_CACHE_DIR": "inductor"}


def lengen_cache_dir() -> str:
    """``$LENGEN_CACHE_DIR``, else ``~/.cache/lengen``."""
    return os.path.expanduser(os.environ.get("LENGEN_CACHE_DIR") or "~/.cache/lengen")


def calibration_file() -> str:
    """This machine's measured step and evaluation times, which every finished run updates and
    every run's estimate of its wall time reads (``lengen.progress.Estimate``):
    ``<lengen cache>/timings.json``. Deleting it only makes the next estimates rough again."""
    return os.path.join(lengen_cache_dir(), "timings.json")


def use_lengen_caches() -> None:
    """matplotlib's font cache and torch.compile's (inductor's) kernels under lengen's cache;
    matplotlib's backend Agg, which the entry points draw their files with anyway
    (``lengen.plots.common.pyplot``): an ``MPLBACKEND`` matplotlib does not know (a typo, a
    desktop's backend) ended every run at matplotlib's import, which Lightning does, in a
    traceback after the run directory was written (KB65, docs/trials/kept-back-2026-12-02.md)."""
    for variable, folder in LIBRARY_CACHES.items():
        os.environ.setdefault(variable, os.path.join(lengen_cache_dir(), folder))
    os.environ["MPLBACKEND"] = "Agg"


def cache_refusal(path: str | None = None, key: str | None = None) -> str | None:
    """A one-line refusal when a cache folder cannot be made or written, naming the key or
    variable that chose it -> None when it can. ``path`` None: every library cache this
    process will write (``LIBRARY_CACHES``); ``key`` None: lengen's own folder, chosen by
    LENGEN_CACHE_DIR or its default."""
    if path is None:
        lengen = lengen_cache_dir()
        for variable in LIBRARY_CACHES:
            value = os.environ.get(variable)
            own = bool(value) and value.startswith(lengen)  # ours: LENGEN_CACHE_DIR decides
            if value and (
                refusal := cache_refusal(lengen if own else value, None if own else variable)
            ):
                return refusal
        return None
    reason = unwritable_reason(path)
    if reason is None:
        return None
    separator = " " if reason.startswith("is ") else ": "
    if key is not None:
        return f"{key}={path}{separator}{reason}; allowed: a writable directory"
    if os.environ.get("LENGEN_CACHE_DIR"):
        return f"LENGEN_CACHE_DIR={path}{separator}{reason}; allowed: a writable directory"
    return (
        f"~/.cache/lengen (LENGEN_CACHE_DIR unset): {path}{separator}{reason}; allowed: "
        f"LENGEN_CACHE_DIR=<a writable directory> (docs/scaling.md)"
    )


def unwritable_reason(path: str | Path) -> str | None:
    """Why a directory cannot be made or written at ``path``, in words that follow the path
    (None: it can): a name longer than the file system allows, a file in the way, a read-only
    mount or another user's folder. Reads only; os.access answers for read-only mounts even
    for root."""
    target = Path(path).expanduser().absolute()
    try:
        limit = os.pathconf(target.anchor, "PC_NAME_MAX")
    except (OSError, ValueError):
        limit = 255
    for part in target.parts:
        if len(part.encode()) > limit:
            return f"the name {part[:20]}… is {len(part.encode())} bytes long (at most {limit})"
    existing = target
    while not existing.exists() and existing != existing.parent:
        if existing.is_symlink():  # Hydra's mkdir would fail on it with a traceback
            where = "is" if existing == target else f"cannot be made: {existing} is"
            return f"{where} a symbolic link to {os.readlink(existing)}, which does not exist (or loops)"
        existing = existing.parent
    if not existing.is_dir():
        return "is a file" if existing == target else f"{existing} is a file"
    if not os.access(existing, os.W_OK | os.X_OK):
        where = "is" if existing == target else f"cannot be made: {existing} is"
        return f"{where} not writable (read-only, or another user's)"
    return None
