"""Every check an encoding makes of the user's input, without importing torch.

A refused command line must not pay for ``import torch`` (2–3 s on a small machine; see
docs/benchmarks.md, "Refused commands"), but the encodings are ``torch.nn.Module``s. So their
checks of their keys and of the run live here, in plain Python: the constructors call these
functions (building an encoding directly still refuses bad input, with the same message), and
the early layer (``lengen.build.check_components``) calls ``check_encoding`` on the pe yaml node
before anything imports torch. One source for every check; nothing here imports torch, directly
or through another module (the groundwork is ``lengen.pe.rules``).

What the classes declare about themselves (``causal_only``, ``supports_axes``,
``bias_of_distance``) is ``SHIPPED``'s table too: the shipped classes read their row, so the
checks need no class. Checks of tensors at forward time (positions past a table, the functional
API's shapes) stay with the tensors.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Mapping
from typing import NamedTuple

from lengen.checks import positive_int
from lengen.pe.rules import (
    BIDIRECTIONAL,
    GRID_DISTANCES,
    KERPLE_VARIANTS,
    NEEDS_ORIGINAL_LENGTH,
    NODE_KEYS,
    POLICIES,
    SHARED_KEYS,
    T5_PAPER_MAX_DISTANCE,
    T5_PAPER_TRAIN_LENGTH,
    TABLES,
    Facts,
    Run,
    axis_share,
    check_bool,
    check_choice,
    check_rope_layout,
    check_scaling,
    check_shared,
    check_sinusoidal_layout,
    check_yarn_ramp,
    is_number,
    p_rope_pairs,
    positive_number_or_null,
    require_even_head_dim,
    rotary_dimension,
)


# -- each encoding's own keys (keywords and defaults as its constructor's) ----------------------
def check_nothing(run: Run) -> None:
    """NoPE (the base class): no keys of its own."""


class RopeSizes(NamedTuple):
    """What RoPE derives from its checked keys."""

    rotary_dim: int  # r: the rotated dimensions of a head
    axis_dim: int  # r / A: the rotated dimensions of one axis
    rotated_pairs: int  # pairs p-RoPE keeps rotating, all axes
    original_max_position: int | None  # L, the default resolved


def check_rope(
    run: Run,
    *,
    base: float | None = None,
    layout: str = "interleaved",
    fraction: float = 1.0,
    p: float = 1.0,
    scaling: str = "none",
    scaling_factor: float = 1.0,
    original_max_position: int | None = None,
    yarn_alpha: float = 1.0,
    yarn_beta: float = 32.0,
    yarn_ramp: str = "dimension",
    yarn_truncate: bool = True,
) -> RopeSizes:
    """``lengen.pe.rope.RoPE``'s keys (base None: the class's default, always valid)."""
    if base is not None and (not is_number(base) or not base > 1):
        raise ValueError(f"pe.base must be > 1, got {base}")
    check_rope_layout(layout)
    require_even_head_dim(run, "rope")
    rotary_dim = rotary_dimension(run.head_dim, fraction)
    axis_dim = axis_share(
        rotary_dim,
        run.axes,
        "pe=rope: the rotated head dimension (model.d_model / model.n_heads × pe.fraction)",
    )
    rotated_pairs = p_rope_pairs(axis_dim, p) * run.axes
    check_scaling(scaling, scaling_factor)
    if original_max_position is not None:
        positive_int("pe.original_max_position", original_max_position)
    for key, value in (("pe.yarn_alpha", yarn_alpha), ("pe.yarn_beta", yarn_beta)):
        if not is_number(value) or value < 0:
            raise ValueError(f"{key} must be a number >= 0, got {value!r}")
    if not yarn_beta > yarn_alpha:
        raise ValueError(f"pe.yarn_beta must be > pe.yarn_alpha, got {yarn_beta} and {yarn_alpha}")
    check_yarn_ramp(yarn_ramp)
    if scaling == "yarn" and yarn_ramp == "dimension" and not yarn_alpha > 0:
        raise ValueError(
            f"pe.yarn_alpha must be > 0 with pe.yarn_ramp=dimension (the pair index where a "
            f"pair makes 0 rotations is infinite), got {yarn_alpha}"
        )
    check_bool("pe.yarn_truncate", yarn_truncate)
    if original_max_position is None:
        # the positions training saw: 0 … train_positions − 1, or under randomized positions
        # the whole range they are drawn from
        original_max_position = run.max_position if run.randomized else run.train_positions
    if scaling in NEEDS_ORIGINAL_LENGTH and original_max_position is None:
        raise ValueError(
            f"pe.original_max_position must be set for pe.scaling={scaling}: the training "
            f"length is unknown here"
        )
    return RopeSizes(rotary_dim, axis_dim, rotated_pairs, original_max_position)


def table_rows(policy: str, table_size, trained: int | None, needed: int, unit: str) -> int:
    """Rows of a table (per axis on grids): ``pe.table_size`` checked, or derived from the
    policy (``extend``: every position evaluation needs; otherwise the trained ones);
    ``pe.policy=error`` refuses evaluation that needs more rows than the table holds."""
    if table_size is None:
        table_size = needed if policy == "extend" else (trained or needed)
    positive_int("pe.table_size", table_size)
    if policy == "error" and needed > table_size:
        raise ValueError(
            f"pe.policy=error: evaluation needs {needed} {unit} but the learned table holds "
            f"{table_size}; allowed: pe.policy=extend (untrained rows past training) or "
            f"interpolate, or evaluation within the table"
        )
    return table_size


def check_learned(
    run: Run,
    *,
    policy: str = "extend",
    table_size: int | None = None,
    init_std: float | None = None,
    table: str = "axial",
) -> int:
    """``lengen.pe.learned.Learned``'s keys -> the rows of its table (per axis, or the side of
    a full grid, on A axes)."""
    check_choice("pe.policy", policy, POLICIES)
    check_choice("pe.table", table, TABLES)
    if policy == "interpolate" and run.randomized:
        raise ValueError(
            "pe.policy=interpolate resizes the trained table past training; with "
            "pe.randomized=true the table already covers pe.max_position; allowed: extend, "
            "error"
        )
    trained = run.train_positions
    if run.axes > 1:
        needed = max(p for p in (trained, run.max_positions, 1) if p is not None)
        rows = table_rows(policy, table_size, trained, needed, "positions per axis")
        if table == "axial":
            axis_share(run.d_model, run.axes, "pe=learned: model.d_model")
        return rows
    needed = max(p for p in (trained, run.position_range, 1) if p is not None)
    return table_rows(policy, table_size, trained, needed, "positions")


def check_alibi(
    run: Run,
    *,
    bidirectional: str = "symmetric",
    learnable_slopes: bool = False,
    grid_distance: str = "euclidean",
) -> None:
    """``lengen.pe.alibi.ALiBi``'s keys."""
    check_choice("pe.grid_distance", grid_distance, GRID_DISTANCES)
    if run.axes > 1 and bidirectional != "symmetric" and not run.causal:
        # a distance between cells: no cell is before another (lengen.pe.alibi's docstring)
        raise ValueError(
            f"pe.bidirectional={bidirectional} has no form on a grid (no cell is before "
            f"another); allowed: symmetric"
        )
    check_choice("pe.bidirectional", bidirectional, BIDIRECTIONAL)
    check_bool("pe.learnable_slopes", learnable_slopes)


def check_sinusoidal(run: Run, *, base: float = 10000.0, layout: str = "interleaved") -> None:
    """``lengen.pe.sinusoidal.Sinusoidal``'s keys."""
    if not is_number(base) or not base > 1:
        raise ValueError(f"pe.base must be > 1, got {base}")
    check_sinusoidal_layout(layout)
    if run.d_model % 2:
        raise ValueError(f"pe=sinusoidal needs an even model.d_model, got {run.d_model}")
    if run.axes > 1:
        axis_share(run.d_model, run.axes, "pe=sinusoidal: model.d_model")


def check_xpos(
    run: Run,
    *,
    base: float = 10000.0,
    layout: str = "interleaved",
    scale_base: float | None = None,
    gamma: float = 0.4,
) -> float | None:
    """``lengen.pe.xpos.XPos``'s keys -> scale_base as a float, None for the default."""
    if not is_number(base) or not base > 1:
        raise ValueError(f"pe.base must be a number > 1, got {base!r}")
    scale_base = positive_number_or_null("pe.scale_base", scale_base)
    if not is_number(gamma) or not gamma > 0:
        raise ValueError(f"pe.gamma must be a number > 0, got {gamma!r}")
    check_rope_layout(layout)
    require_even_head_dim(run, "xpos")
    return scale_base


def check_rope_mixed(run: Run, *, base: float | None = None, per_layer: bool = True) -> None:
    """``lengen.pe.rope_mixed.RoPEMixed``'s keys (base None: the class's default, valid)."""
    if base is not None and (not is_number(base) or not base > 1):
        raise ValueError(f"pe.base must be > 1, or null for the default, got {base!r}")
    check_bool("pe.per_layer", per_layer)
    require_even_head_dim(run, "rope_mixed")
    axis_share(
        run.head_dim,
        run.axes,
        "pe=rope_mixed: the head dimension (model.d_model / model.n_heads)",
    )


def t5_max_distance(run: Run, num_buckets: int, max_distance) -> tuple[int, str]:
    """``pe.max_distance`` -> (value, where it came from): as given, or for null T5's ratio
    train_positions // 4, at least num_buckets // 2 + 1 (T5's 128 without training positions)."""
    if max_distance is not None:
        return max_distance, "given"
    train = run.train_positions
    if not train:
        return T5_PAPER_MAX_DISTANCE, "T5's 128 (training positions unknown)"
    ratio = T5_PAPER_TRAIN_LENGTH // T5_PAPER_MAX_DISTANCE  # 4
    value = max(train // ratio, num_buckets // 2 + 1)
    return value, f"max(train_positions {train} // {ratio}, num_buckets // 2 + 1)"


def check_t5(
    run: Run, *, num_buckets: int = 32, max_distance: int | None = None
) -> tuple[int, str]:
    """``lengen.pe.t5.T5RelativeBias``'s keys -> (max_distance, where it came from)."""
    positive_int("pe.num_buckets", num_buckets, minimum=4)
    max_distance, source = t5_max_distance(run, num_buckets, max_distance)
    if (
        isinstance(max_distance, bool)
        or not isinstance(max_distance, int)
        or max_distance <= num_buckets // 2
    ):
        raise ValueError(
            f"pe.max_distance must be an integer > pe.num_buckets // 2 = {num_buckets // 2} "
            f"(the exactly represented distances), or null (train_positions // 4), got "
            f"{max_distance!r}"
        )
    return max_distance, source


def check_sandwich(run: Run, *, dim: int = 128, base: float = 10000.0) -> None:
    """``lengen.pe.sandwich.Sandwich``'s keys."""
    if isinstance(dim, bool) or not isinstance(dim, int) or dim < 2 or dim % 2:
        raise ValueError(f"pe.dim must be an even integer >= 2, got {dim!r}")
    if not is_number(base) or not base > 1:
        raise ValueError(f"pe.base must be > 1, got {base}")


def check_kerple(run: Run, *, variant: str = "log") -> None:
    """``lengen.pe.kerple.KERPLE``'s keys."""
    check_choice("pe.variant", variant, KERPLE_VARIANTS)


def check_fire(
    run: Run, *, mlp_width: int = 32, init_c: float = 0.1, init_threshold: float | None = None
) -> float | None:
    """``lengen.pe.fire.FIRE``'s keys -> init_threshold as a float, None for the default."""
    positive_int("pe.mlp_width", mlp_width)
    if not is_number(init_c) or not init_c > 0:
        raise ValueError(f"pe.init_c must be a number > 0, got {init_c!r}")
    return positive_number_or_null("pe.init_threshold", init_threshold)


def check_cope(run: Run, *, npos_max: int = 64) -> int:
    """``lengen.pe.cope.CoPE``'s keys -> npos_max."""
    return positive_int("pe.npos_max", npos_max, minimum=2)


# -- the encodings shipped with lengen ---------------------------------------------------------
class Shipped(NamedTuple):
    """A shipped encoding: where its class lives, what it declares, what checks its keys."""

    module: str  # lengen.pe.<module>
    facts: Facts
    check: Callable  # check_<name>(run, **keys), the constructor's keywords and defaults


#: class name -> the shipped encoding; the classes read their facts from here (``facts``)
SHIPPED: dict[str, Shipped] = {
    "PositionalEncoding": Shipped("base", Facts(), check_nothing),
    "NoPE": Shipped("nope", Facts(supports_axes=True), check_nothing),
    "Sinusoidal": Shipped("sinusoidal", Facts(supports_axes=True), check_sinusoidal),
    "Learned": Shipped("learned", Facts(supports_axes=True), check_learned),
    "RoPE": Shipped("rope", Facts(supports_axes=True), check_rope),
    "RoPEMixed": Shipped("rope_mixed", Facts(supports_axes=True), check_rope_mixed),
    "XPos": Shipped("xpos", Facts(causal_only=True), check_xpos),
    "ALiBi": Shipped("alibi", Facts(supports_axes=True, bias_of_distance=True), check_alibi),
    "T5RelativeBias": Shipped("t5", Facts(bias_of_distance=True), check_t5),
    "KERPLE": Shipped("kerple", Facts(bias_of_distance=True), check_kerple),
    "Sandwich": Shipped("sandwich", Facts(bias_of_distance=True), check_sandwich),
    "FIRE": Shipped("fire", Facts(bias_of_distance=True), check_fire),
    "CoPE": Shipped("cope", Facts(causal_only=True), check_cope),
}

#: ``_target_`` -> class name: both spellings, ``lengen.pe.rope.RoPE`` and ``lengen.pe.RoPE``
TARGETS = {
    target: name
    for name, shipped in SHIPPED.items()
    for target in (f"lengen.pe.{shipped.module}.{name}", f"lengen.pe.{name}")
}


def facts(name: str) -> Facts:
    """The facts of shipped class ``name`` (its ``causal_only``, ``supports_axes``,
    ``bias_of_distance``, in that order)."""
    return SHIPPED[name].facts


def encoding_keys(node: Mapping) -> dict:
    """The keys of a pe yaml node the encoding takes: without Hydra's (``_target_``,
    ``_partial_``, …) and lengen's own (``name``)."""
    return {
        key: value
        for key, value in node.items()
        if key not in NODE_KEYS and not (key.startswith("_") and key.endswith("_"))
    }


def check_encoding(
    node: Mapping,
    *,
    d_model: int,
    n_heads: int,
    causal: bool,
    train_positions: int | None,
    max_positions: int | None,
    axes: int = 1,
    n_layers: int = 1,
) -> bool:
    """Every check the encoding named by node["_target_"] makes of its keys and of the run
    (the same keyword arguments lengen.build passes to its constructor) -> True when checked;
    False when _target_ names no encoding shipped with lengen (a user's new encoding: its
    constructor checks it when built). Raises ValueError naming the key (messages as the
    constructors'), also for a key the encoding does not take."""
    name = TARGETS.get(node.get("_target_"))
    if name is None:
        return False
    keys = encoding_keys(node)
    takes = [key for key in inspect.signature(SHIPPED[name].check).parameters if key != "run"]
    unknown = sorted(set(keys) - {*takes, *SHARED_KEYS})
    if unknown:
        raise ValueError(
            f"pe.{unknown[0]}: {name} takes no such key; allowed: {', '.join(takes + list(SHARED_KEYS))}"
        )
    shared = {key: keys.pop(key) for key in SHARED_KEYS if key in keys}
    run = check_shared(
        name,
        facts(name),
        d_model=d_model,
        n_heads=n_heads,
        causal=causal,
        train_positions=train_positions,
        max_positions=max_positions,
        axes=axes,
        n_layers=n_layers,
        **shared,
    )
    SHIPPED[name].check(run, **keys)
    return True
