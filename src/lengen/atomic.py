"""Atomic file writing: the one way lengen puts a file on disk.

A reader, a sweep's report or a run resumed after a crash or a power cut sees the old file or
the new one, never part of either: the new content goes to a temporary file in the target's
folder (a rename is only atomic within one filesystem), reaches the disk, and only then is
renamed onto the target; the rename itself is synced too.
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

# os.umask can only be read by setting it: read once at import, so files written here get the
# mode a plain open() gives them rather than mkstemp's 0600
_UMASK = os.umask(0)
os.umask(_UMASK)


def atomic_write(path: str | Path, data: str | bytes) -> None:
    """Write ``data`` (text as UTF-8) to ``path``, creating its folder if needed. A failure at
    any step leaves ``path`` as it was and no temporary file behind."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data.encode("utf-8") if isinstance(data, str) else data)
        os.chmod(tmp, 0o666 & ~_UMASK)
        replace_durably(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def replace_durably(tmp: str | Path, path: str | Path) -> None:
    """Rename a finished temporary file onto ``path`` (same folder): its data is synced to disk
    before the name points at it, and the rename is synced after. For writers that cannot hand
    over their bytes (``torch.save`` of a checkpoint writes to a path); others use
    :func:`atomic_write`."""
    with open(tmp, "rb") as handle:
        os.fsync(handle.fileno())  # fsync flushes the file, whichever descriptor asks
    os.replace(tmp, path)
    fsync_directory(Path(path).parent)


def fsync_directory(folder: str | Path) -> None:
    """Make a rename in ``folder`` durable (a power cut cannot undo it); best effort."""
    try:
        descriptor = os.open(folder, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(descriptor)
    except OSError:
        pass
    finally:
        os.close(descriptor)
