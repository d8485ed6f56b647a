"""Memory limits a process lives under besides the machine's: ``ulimit -v`` / ``ulimit -d``
(RLIMIT_AS, RLIMIT_DATA) and its memory cgroup's limit (v2 ``memory.max``, v1
``memory.limit_in_bytes``), each less what is already used, so the size pre-checks
(``lengen.preflight.resources.available_memory``) compare an estimate with what the run may
really take. Without them, eval.py under ``ulimit -v 1200000`` passed the check against the
machine's MemAvailable and then died in OpenBLAS's native abort (E13b). No torch here.
"""

from __future__ import annotations

import resource
import sys
from pathlib import Path

#: address space and data segment that importing torch and pytorch_lightning adds to a
#: process (measured on torch 2.13 CPU: VmSize +904 MiB, VmData +440 MiB); the check runs
#: before that import, and the run needs it all the same
TORCH_ADDRESS_SPACE = 904 * 2**20
TORCH_DATA = 440 * 2**20
#: a cgroup limit at or above this is "no limit" (v1 writes 2^63 rounded down to a page)
UNLIMITED = 1 << 62
#: where cgroup file systems are mounted
CGROUP_ROOT = Path("/sys/fs/cgroup")


def memory_limits() -> list[tuple[int, str]]:
    """(bytes this process may still take, what limits it) for each limit set: ulimit -v and
    -d less this process's own use and torch's import (where still to come), the memory cgroup's less its usage."""
    limits = []
    status = _status_kib()
    for rlimit, field, torch_part, name in (
        (resource.RLIMIT_AS, "VmSize", TORCH_ADDRESS_SPACE, "ulimit -v"),
        (resource.RLIMIT_DATA, "VmData", TORCH_DATA, "ulimit -d"),
    ):
        soft, _ = resource.getrlimit(rlimit)
        if soft != resource.RLIM_INFINITY and soft < UNLIMITED:
            # torch's share is in the process's size once imported (a test, a notebook)
            used = status.get(field, 0) * 1024 + (0 if torch_imported() else torch_part)
            limits.append((max(soft - used, 0), name))
    cgroup = cgroup_available()
    if cgroup is not None:
        limits.append((cgroup, "memory cgroup"))
    return limits


def torch_imported() -> bool:
    return "torch" in sys.modules


def _status_kib() -> dict[str, int]:
    """This process's ``/proc/self/status`` sizes (kB), empty where it cannot be read."""
    sizes = {}
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            name, _, value = line.partition(":")
            if value.strip().endswith("kB"):
                sizes[name] = int(value.split()[0])
    except (OSError, ValueError):
        pass
    return sizes


def cgroup_available(root: Path = CGROUP_ROOT, membership: str | None = None) -> int | None:
    """Bytes left under this process's memory cgroup (its limit less its usage, the tightest
    of it and its parents), or None where no limit is set or none can be read.
    ``membership``: the text of ``/proc/self/cgroup`` (read when None)."""
    if membership is None:
        try:
            membership = Path("/proc/self/cgroup").read_text()
        except OSError:
            return None
    tightest = None
    for line in membership.splitlines():
        _, controllers, path = (line.split(":", 2) + ["", ""])[:3]
        if controllers == "":  # v2: one hierarchy
            pair = ("memory.max", "memory.current")
            mount = root
        elif "memory" in controllers.split(","):
            pair = ("memory.limit_in_bytes", "memory.usage_in_bytes")
            mount = root / "memory"
        else:
            continue
        for folder in _folders(mount, path):
            left = _left(folder, *pair)
            if left is not None and (tightest is None or left < tightest):
                tightest = left
    return tightest


def _folders(mount: Path, path: str) -> list[Path]:
    """The cgroup's folder and its parents up to the mount; the mount alone where the path
    is not visible (a container sees its own cgroup as the root)."""
    folder = mount / path.strip("/")
    if not folder.is_dir():
        return [mount]
    folders = [folder]
    while folder != mount and folder.parent != folder:
        folder = folder.parent
        folders.append(folder)
    return folders


def _left(folder: Path, limit_file: str, usage_file: str) -> int | None:
    try:
        text = (folder / limit_file).read_text().strip()
    except OSError:
        return None
    if text == "max" or not text.isdigit() or int(text) >= UNLIMITED:
        return None
    try:
        usage = int((folder / usage_file).read_text().strip())
    except (OSError, ValueError):
        usage = 0
    return max(int(text) - usage, 0)
