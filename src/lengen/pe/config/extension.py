"""``pe.extension``: RoPE's training-free context-extension arms that change attention itself
(Self-Extend, ReRoPE, dual chunk attention), without torch. ``pe.scaling`` changes RoPE's
frequencies only; these re-map the *relative positions* a query reads, so RoPE computes
attention itself (``lengen.pe.extension``). Each arm's keys are checked in its own module."""

from __future__ import annotations

from lengen.pe.config.base import EncodingContext
from lengen.pe.config.dual_chunk import check_dual_chunk
from lengen.pe.config.rerope import check_rerope
from lengen.pe.config.self_extend import check_self_extend

#: ``pe.extension`` value -> the check of its keys, returning its parameters
ARM_CHECKS = {
    "self_extend": check_self_extend,
    "rerope": check_rerope,
    "dual_chunk": check_dual_chunk,
}
EXTENSIONS = ("none", *ARM_CHECKS)
#: each arm's own keys (set with another arm, they would be ignored: refused)
ARM_KEYS = {
    "self_extend": ("self_extend_group", "self_extend_window"),
    "rerope": ("rerope_window", "rerope_leak"),
    "dual_chunk": ("dca_chunk_size", "dca_local_window"),
}


def check_extension(cfg, context: EncodingContext):
    """The arm's parameters (a NamedTuple of its module), or None for ``none``. Refused, one
    line each: keys of an arm not chosen; a bidirectional model, positions other than the
    indices 0 … T−1, grids, another scaling or a local mask, which the arms do not define."""
    arm = cfg.extension
    for other, keys in ARM_KEYS.items():
        for key in keys:
            if other != arm and getattr(cfg, key) is not None:
                raise ValueError(
                    f"pe.{key}={getattr(cfg, key)} is an option of pe.extension={other}, but "
                    f"pe.extension={arm}; allowed: null, or pe.extension={other}"
                )
    if arm == "none":
        return None
    conflicts = (
        (not context.causal, "model", "a bidirectional stack", "model=decoder"),
        (context.axes > 1, "data", "positions on grid axes", "a sequence task"),
        (cfg.randomized, "pe.randomized", "randomized positions", "pe.randomized=false"),
        (context.task_positions, "data.task.positions", "task positions", "index"),
        (cfg.scaling != "none", "pe.scaling", f"pe.scaling={cfg.scaling}", "pe.scaling=none"),
        (cfg.window is not None, "pe.window", "a sliding window", "pe.window=null"),
        (cfg.chunk is not None, "pe.chunk", "chunks", "pe.chunk=null"),
    )
    for refused, key, what, allowed in conflicts:
        if refused:
            raise ValueError(
                f"pe.extension={arm}: the arm re-maps causal relative positions of the indices "
                f"0 … T−1 and is not defined with {what} ({key}); allowed: {allowed}"
            )
    return ARM_CHECKS[arm](cfg, context)
