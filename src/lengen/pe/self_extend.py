"""Self-Extend (Jin et al., 2024, "LLM Maybe LongLM: Self-Extend LLM Context Window Without
Tuning", ICML; arXiv 2401.01325), an arm of ``pe.extension`` (``lengen.pe.extension``).

Within a neighbour window W a query reads RoPE's normal relative positions; beyond it, grouped
positions: query i and key j sit at ⌊i/G⌋ + (W − ⌊W/G⌋) and ⌊j/G⌋, so the relative position
is ⌊i/G⌋ − ⌊j/G⌋ + W − ⌊W/G⌋, which meets the neighbour region near i − j = W and grows G times
slower past it (the paper's text beyond its abstract is not stored: the formula is the
reference code's). Two score sets, neighbour and grouped, are merged by the mask i − j < W, as
the reference code does (datamllab/LongLM,
``self_extend_patch/Llama.py``, ``self_extend_forward``: ``neighbor_attention_mask`` picks
``neighbor_attn_weights`` where i − j < W, ``group_attn_weights`` elsewhere).

**Shift.** The reference's full-pass eager path writes the shift as ``W − W / G`` (a float), its
decoding and flash paths as ``W − W // G``; lengen uses the integer W − ⌊W/G⌋ everywhere, so a
cached step and a full pass read the same positions. The reference also sets the shift to 0 when
no query reaches W; no grouped score is selected then, so the outputs do not change.
"""

from __future__ import annotations

from torch import Tensor

from lengen.pe.config.self_extend import SelfExtendParams


class SelfExtend:
    """Two score sets: 0 neighbour (i, j), 1 grouped (⌊i/G⌋ + W − ⌊W/G⌋, ⌊j/G⌋)."""

    sets = 2

    def __init__(self, params: SelfExtendParams) -> None:
        self.group, self.window = params.group, params.window
        self.shift = self.window - self.window // self.group  # W − ⌊W/G⌋

    @property
    def plain_keys(self) -> int:
        """Up to W keys every score is a neighbour's: plain RoPE."""
        return self.window

    def query_positions(self, q_index: Tensor) -> list[Tensor]:
        """q_index (c,) -> each set's query positions (c,)."""
        return [q_index, q_index // self.group + self.shift]

    def key_positions(self, k_index: Tensor) -> list[Tensor]:
        """k_index (Tk,) -> each set's key positions (Tk,)."""
        return [k_index, k_index // self.group]

    def choose(self, q_index: Tensor, k_index: Tensor) -> Tensor:
        """Broadcastable (c, 1), (1, Tk) -> the set of each score (c, Tk): grouped past W."""
        return (q_index - k_index >= self.window).long()

    def describe(self) -> dict:
        return {
            "self_extend_group": self.group,
            "self_extend_window": self.window,
            "self_extend_shift": self.shift,
        }
