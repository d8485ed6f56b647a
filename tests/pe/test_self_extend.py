"""Self-Extend (``pe.extension=self_extend``, lengen.pe.self_extend) against its formula: within
the neighbour window W the relative position i − j, beyond it ⌊i/G⌋ − ⌊j/G⌋ + W − ⌊W/G⌋ (the
reference code's shift, datamllab/LongLM ``self_extend_patch/Llama.py``)."""

from __future__ import annotations

import pytest
import torch

from extension_reference import arm_output, random_qkv, relative_attention
from lengen.pe.config.base import EncodingContext
from lengen.pe.config.rope import RoPEConfig
from lengen.pe.self_extend import SelfExtend

pytestmark = pytest.mark.usefixtures("single_thread")


def self_extend_relative(group: int, window: int):
    def relative(i: int, j: int) -> float:
        if i - j < window:
            return i - j
        return i // group - j // group + window - window // group

    return relative


@pytest.mark.parametrize(("group", "window"), [(2, 4), (3, 5), (4, 3)])
def test_attention_equals_the_formula(group, window):
    q, k, v = random_qkv()
    expected = relative_attention(q, k, v, self_extend_relative(group, window))
    actual = arm_output(
        q, k, v, extension="self_extend", self_extend_group=group, self_extend_window=window
    )
    torch.testing.assert_close(actual, expected, rtol=1e-5, atol=1e-5)


def test_grouped_positions_use_the_integer_shift():
    # G = 3, W = 5: shift W − W//G = 4 (not the eager path's 5 − 5/3); query 11, key 1 is
    # grouped (11 − 1 ≥ 5): 11//3 + 4 − 1//3 = 7
    arm = SelfExtend(RoPEConfig(extension="self_extend", self_extend_group=3,
                                self_extend_window=5).check(EncodingContext(8, 2), "RoPE").extension)  # fmt: skip
    query = arm.query_positions(torch.tensor([11]))[1]
    key = arm.key_positions(torch.tensor([1]))[1]
    assert int(query - key) == 7 and arm.shift == 4


def test_both_keys_are_required():
    with pytest.raises(ValueError, match=r"^pe\.self_extend_window must be set"):
        RoPEConfig(extension="self_extend", self_extend_group=2).check(
            EncodingContext(8, 2), "RoPE"
        )
