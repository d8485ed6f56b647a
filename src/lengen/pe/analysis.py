"""Numerical checks of the encodings' defining properties, for the analysis figures and tests.

* ``check_shift_rotation``: a sinusoidal table satisfies PE(p + k) = T(k) · PE(p) for a fixed
  block rotation T(k) (Vaswani et al.'s motivation for the sinusoids);
* ``rope_relative_scores``: RoPE's q·k as a function of the key's offset from the query, at any
  query position (equal curves: the score depends on the offset only).

On grids (positions on A axes): ``grid_similarity`` (one cell's encoding against every cell's,
an image), ``rotated_grid_scores`` (q·k from one cell to every cell), ``grid_offset_error``
(max |score(p + δ, q + δ) − score(p, q)|: 2-D RoPE's offset-only property, numerically) and
``grid_axis_dependence`` (the score changes with each axis of the offset).
"""

from __future__ import annotations

from lengen.pe.config.base import BASE  # the encodings' default base, written once


def shift_rotation_matrix(shift: float, frequencies):
    """T(k): block-diagonal 2×2 rotations with PE(p + k) = T(k) · PE(p) for an interleaved
    sinusoidal table (columns 2i, 2i+1 = sin, cos of p·ω_i) -> Tensor[dim, dim], float64.

    Each block is [[cos kω_i, sin kω_i], [−sin kω_i, cos kω_i]], from sin(a+b) = sin a cos b +
    cos a sin b and cos(a+b) = cos a cos b − sin a sin b."""
    import torch

    angles = shift * torch.as_tensor(frequencies, dtype=torch.float64)  # (dim/2,)
    cos, sin = angles.cos(), angles.sin()
    dim = 2 * angles.shape[0]
    sin_rows = torch.arange(0, dim, 2)  # row of each block's sin component
    cos_rows = sin_rows + 1
    rotation = torch.zeros(dim, dim, dtype=torch.float64)
    rotation[sin_rows, sin_rows], rotation[sin_rows, cos_rows] = cos, sin
    rotation[cos_rows, sin_rows], rotation[cos_rows, cos_rows] = -sin, cos
    return rotation


def check_shift_rotation(table, base: float = BASE) -> float:
    """max over p, k (p + k < length) of |T(k) · PE(p) − PE(p + k)| for an interleaved
    sinusoidal table [length, dim] (a tensor or an array), with T(k) from
    :func:`shift_rotation_matrix` and ω_i = base^(−2i/dim) computed here in float64,
    independently of ``lengen.pe``.

    A correct table gives its own rounding error: for fp32, about length · 2⁻²⁴ (the fp32
    angle p·ω at the largest position; 7e-6 at 128 positions, 6e-5 at 1024); a float64 table
    ~1e-13. A corrupted table (wrong frequency, swapped or shifted columns) gives O(1)."""
    import torch

    table = torch.as_tensor(table)
    if table.ndim != 2 or table.shape[1] % 2:
        raise ValueError(f"need a table [length, even dim], got shape {tuple(table.shape)}")
    length, dim = table.shape
    frequencies = base ** -(torch.arange(0, dim, 2, dtype=torch.float64) / dim)  # (dim/2,)
    table = table.to(torch.float64)
    error = 0.0
    for shift in range(length):
        rotation = shift_rotation_matrix(shift, frequencies)  # (dim, dim)
        predicted = table[: length - shift] @ rotation.T  # row p: T(k) · PE(p)
        error = max(error, (predicted - table[shift:]).abs().max().item())
    return error


def rope_relative_scores(query, key, offsets, base: float = BASE, query_position: int = 0):
    """q·k after RoPE with q at ``query_position`` and k at query_position + offset, for each
    offset -> Tensor[len(offsets)] (float64 dot products of the rotated fp32 vectors)."""
    import torch

    from lengen.pe import apply_rope

    offsets = torch.as_tensor(offsets)
    q = apply_rope(query[None, :], torch.tensor([query_position]), base)  # (1, D)
    keys = key[None, :].expand(len(offsets), -1)  # (K, D)
    k = apply_rope(keys, query_position + offsets, base)  # (K, D)
    return k.double() @ q[0].double()


# -- positions on grids ------------------------------------------------------------------------
def grid_similarity(table, anchor):
    """Cosine similarity of one cell's encoding to every cell's: table (*shape, D) (e.g.
    ``sinusoidal_grid``), anchor a cell's coordinates -> Tensor[*shape], float64."""
    import torch

    table = torch.as_tensor(table).to(torch.float64)  # (*shape, D)
    reference = table[tuple(anchor)]  # (D,)
    norms = table.norm(dim=-1) * reference.norm()
    return (table @ reference) / norms.clamp_min(1e-12)


def rotated_grid_scores(rotate, query, key, shape, anchor):
    """q·k with the query at cell ``anchor`` and the key at every cell of a grid of ``shape``,
    after ``rotate(x (..., T, hd), positions (T, A))`` -> Tensor[*shape], float64."""
    import torch

    from lengen.pe.grid import grid_positions

    cells = grid_positions(shape)  # (T, A)
    q = rotate(query[None, :], torch.as_tensor(anchor)[None, :])  # (1, hd)
    k = rotate(key[None, :].expand(len(cells), -1), cells)  # (T, hd)
    return (k.double() @ q[0].double()).reshape(*shape)


def grid_offset_error(rotate, head_dim: int, shape, samples: int = 256, seed: int = 0) -> float:
    """max |score(p + δ, q + δ) − score(p, q)| of a rotation on a grid, over ``samples`` random
    (q, k) vector pairs, cells p, q and offset vectors δ with p + δ, q + δ inside the grid: 0 up
    to fp32 rounding when the score depends on the offset vector only (RoPE's defining property
    on grids). ``rotate(x (N, hd), positions (N, A))`` rotates one vector per position."""
    import torch

    generator = torch.Generator().manual_seed(seed)
    sizes = torch.tensor(shape)  # (A,)
    vectors = torch.randn(2, samples, head_dim, generator=generator)  # q, k

    def cells():
        return (torch.rand(samples, len(shape), generator=generator) * sizes).long()  # (N, A)

    p, q = cells(), cells()
    low = -torch.minimum(p, q)  # the shift keeps both cells inside the grid
    high = sizes - 1 - torch.maximum(p, q)
    shift = low + (torch.rand(samples, len(shape), generator=generator) * (high - low + 1)).long()

    def scores(query_cells, key_cells):
        rotated_q = rotate(vectors[0], query_cells).double()  # (N, hd)
        rotated_k = rotate(vectors[1], key_cells).double()
        return (rotated_q * rotated_k).sum(-1)  # (N,)

    return (scores(p + shift, q + shift) - scores(p, q)).abs().max().item()


def grid_axis_dependence(rotate, head_dim: int, axes: int, seed: int = 0) -> list[float]:
    """|score(0, δ) − score(0, δ + e_a)| for a random (q, k) and δ = 0, per axis a: every entry
    > 0 when the score depends on every axis of the offset (tests, figure captions)."""
    import torch

    generator = torch.Generator().manual_seed(seed)
    query, key = torch.randn(2, 1, head_dim, generator=generator)
    origin = torch.zeros(1, axes, dtype=torch.long)
    base_score = (rotate(query, origin) * rotate(key, origin)).sum().item()
    changes = []
    for axis in range(axes):
        moved = origin.clone()
        moved[0, axis] = 1
        changes.append(abs((rotate(query, origin) * rotate(key, moved)).sum().item() - base_score))
    return changes
